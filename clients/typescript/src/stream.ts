/**
 * StreamModel replies as an async iterable: ModelStream.
 *
 *   const stream = sidecar.streamModel({ model: "fast", messages });
 *   for await (const event of stream) { ... }        // breaking out cancels the RPC
 *   const reply = await sidecar.streamModel({ model: "fast", messages }).collect();
 *
 * The call starts when the stream is first read. What the stream keeps while it is read:
 *
 *   event       text / toolCalls / reasoning            restarts   final
 *   text        text += delta                           -          -
 *   toolCall    toolCalls[index] grows by the fragment  -          -
 *   reasoning   reasoning[index]: text += delta; its    -          -
 *               signature / redacted data when they come
 *   restart     all emptied: what came before is void   += 1       -
 *   final       -                                       -          the whole reply
 *
 * To pass the reasoning back on the next turn, push assistant(stream.final): the final reply's
 * reasoning is the same, with the wire format that made it.
 *
 * A failure rejects the iteration with the SidecarError CallModel rejects with, after every
 * event sent before it; STREAM_INTERRUPTED is a StreamInterruptedError carrying the partial
 * text. Breaking out of the loop, cancel(), or aborting the signal cancels the RPC (an aborted
 * signal rejects with its reason, as every call does).
 */
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  FailureKind,
  FailureSchema,
  ReasoningPartSchema,
  ToolCallSchema,
  type CallModelResponse,
  type ReasoningPart,
  type StreamModelEvent,
  type ToolCall,
} from "./gen/sidecar/v1/sidecar_pb.js";
import { SidecarError, explain, fromServiceError, fromStatus } from "./errors.js";

/** The message of the SYSTEM failure collect() rejects with when a stream ends without its final event. */
export const NO_FINAL_MESSAGE = "The StreamModel stream ended without its final event.";

/** One StreamModel call, read as an async iterable of StreamModelEvent (once). */
export class ModelStream implements AsyncIterable<StreamModelEvent> {
  private readonly textParts: string[] = [];
  private readonly calls = new Map<number, ToolCall>();
  private readonly thoughts = new Map<number, ReasoningPart>();
  private restartCount = 0;
  private finalReply: CallModelResponse | undefined;
  private call: grpc.ClientReadableStream<StreamModelEvent> | undefined;
  private cancelled = false;
  private iterator: AsyncGenerator<StreamModelEvent, void, undefined> | undefined;

  /**
   * @param open starts the call (metadata and deadline included): see serverStreamOpener
   * @param signal aborting it cancels the call; the iteration rejects with its reason
   */
  constructor(
    private readonly open: () => grpc.ClientReadableStream<StreamModelEvent>,
    private readonly signal?: AbortSignal,
  ) {}

  /** The text since the last restart, joined. */
  get text(): string {
    return this.textParts.join("");
  }

  /** The tool calls assembled from their fragments since the last restart, by index. */
  get toolCalls(): ToolCall[] {
    return [...this.calls.entries()].sort(([a], [b]) => a - b).map(([, call]) => call);
  }

  /** The reasoning parts assembled from their deltas since the last restart, by index. */
  get reasoning(): ReasoningPart[] {
    return [...this.thoughts.entries()].sort(([a], [b]) => a - b).map(([, part]) => part);
  }

  /** The number of restart events received. */
  get restarts(): number {
    return this.restartCount;
  }

  /** The whole reply, as CallModel returns it; undefined until the final event. */
  get final(): CallModelResponse | undefined {
    return this.finalReply;
  }

  /** The events; the same iterator every time (a stream is read once). */
  [Symbol.asyncIterator](): AsyncGenerator<StreamModelEvent, void, undefined> {
    this.iterator ??= this.events();
    return this.iterator;
  }

  /** Reads the rest of the stream and resolves to the final reply (`text` holds its text). */
  async collect(): Promise<CallModelResponse> {
    const events = this[Symbol.asyncIterator]();
    while (!(await events.next()).done);
    if (this.finalReply === undefined && this.cancelled) throw cancelledError();
    if (this.finalReply === undefined) {
      throw SidecarError.fromFailure(
        create(FailureSchema, { kind: FailureKind.SYSTEM, message: NO_FINAL_MESSAGE, explanation: explain(NO_FINAL_MESSAGE, false) }),
      );
    }
    return this.finalReply;
  }

  /**
   * Cancels the RPC: a read still pending, and collect() after it (or after a loop left early),
   * reject with JOB_CANCELLED. Nothing once the call has ended.
   */
  cancel(): void {
    this.cancelled = true;
    this.call?.cancel();
  }

  private async *events(): AsyncGenerator<StreamModelEvent, void, undefined> {
    const signal = this.signal;
    if (signal?.aborted) throw signal.reason;
    if (this.cancelled) throw cancelledError();
    const call = this.open();
    this.call = call;
    // The loop below reads the call's error; this listener keeps one that comes after the loop
    // was left (the cancellation of a break) from being an unhandled 'error' event.
    call.on("error", () => {});
    const onAbort = () => call.cancel();
    signal?.addEventListener("abort", onAbort, { once: true });
    let ended = false;
    try {
      for await (const event of call as AsyncIterable<StreamModelEvent>) {
        this.absorb(event);
        yield event;
      }
      ended = true;
    } catch (err) {
      ended = true;
      if (signal?.aborted && (err as Partial<grpc.ServiceError>).code === grpc.status.CANCELLED) throw signal.reason;
      throw fromServiceError(err);
    } finally {
      signal?.removeEventListener("abort", onAbort);
      if (!ended) this.cancel(); // the loop was left early: cancel the call (and say so to collect())
      call.cancel(); // nothing once the call has ended
    }
  }

  private absorb(event: StreamModelEvent): void {
    const e = event.event;
    switch (e.case) {
      case "text":
        this.textParts.push(e.value.text);
        break;
      case "toolCall": {
        const d = e.value;
        let call = this.calls.get(d.index);
        if (!call) {
          call = create(ToolCallSchema, {});
          this.calls.set(d.index, call);
        }
        call.id ||= d.id;
        call.name ||= d.name;
        call.argumentsJson += d.argumentsFragment;
        break;
      }
      case "reasoning": {
        const d = e.value;
        let part = this.thoughts.get(d.index);
        if (!part) {
          part = create(ReasoningPartSchema, {});
          this.thoughts.set(d.index, part);
        }
        part.text += d.text;
        if (d.signature) part.signature = d.signature;
        if (d.redactedData) part.redactedData = d.redactedData;
        break;
      }
      case "restart":
        this.textParts.length = 0;
        this.calls.clear();
        this.thoughts.clear();
        this.restartCount += 1;
        break;
      case "final":
        this.finalReply = e.value;
        break;
    }
  }
}

/** The JOB_CANCELLED error of a stream cancelled on this side. */
function cancelledError(): SidecarError {
  return fromStatus(grpc.status.CANCELLED, "Cancelled on client");
}
