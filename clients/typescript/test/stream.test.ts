import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  CallModelResponseSchema,
  FailureKind,
  FailureSchema,
  MidStreamPolicy,
  RestartCause,
  Role,
  StreamModelEventSchema,
  type CallModelRequest,
  type Failure,
  type StreamModelEvent,
} from "../src/gen/sidecar/v1/sidecar_pb.js";
import {
  ModelStream,
  NO_FINAL_MESSAGE,
  SidecarClient,
  SidecarError,
  StreamInterruptedError,
  UNCORRECTABLE_LINE,
  assistant,
  fromServiceError,
  sidecarServiceDefinition,
} from "../src/index.js";
import { failureStatus, quotaFailure, serviceError, statusError } from "./helpers.js";

/** How long a test waits for the server to see a cancellation, in ms. */
const WAIT_FOR_SERVER_MS = 5000;

type Init = Parameters<typeof create<typeof StreamModelEventSchema>>[1];
const event = (init: Init): StreamModelEvent => create(StreamModelEventSchema, init);
const text = (t: string) => event({ event: { case: "text", value: { text: t } } });

function interruptedFailure(): Failure {
  const message = "The stream of fast was cut after 2 deltas: connection dropped.";
  return create(FailureSchema, {
    kind: FailureKind.STREAM_INTERRUPTED,
    message,
    explanation: `${message}\n${UNCORRECTABLE_LINE}`,
    attempts: 1,
    detail: { case: "stream", value: { partialText: "Hello, wo", reason: "connection dropped", deltasSent: 2 } },
    hops: [
      { deployment: "fast-a", kind: FailureKind.CIRCUIT_OPEN, reason: "circuit open", skipped: true },
      { deployment: "fast-b", kind: FailureKind.STREAM_INTERRUPTED, attempts: 1, reason: "cut" },
    ],
  });
}

/** What the scripted server saw of the "slow" stream. */
let slowStarted: () => void = () => {};
let slowCancelled: () => void = () => {};
let seenPolicy: MidStreamPolicy | undefined;

function streamModel(call: grpc.ServerWritableStream<CallModelRequest, StreamModelEvent>): void {
  const send = (...events: StreamModelEvent[]) => events.forEach((e) => call.write(e));
  switch (call.request.model) {
    case "deltas":
      send(
        text("Hel"),
        text("lo"),
        event({ event: { case: "toolCall", value: { index: 0, id: "call_1", name: "search", argumentsFragment: '{"q":' } } }),
        event({ event: { case: "toolCall", value: { index: 1, id: "call_2", name: "fetch", argumentsFragment: "{}" } } }),
        event({ event: { case: "toolCall", value: { index: 0, argumentsFragment: '"x"}' } } }),
        event({
          event: {
            case: "final",
            value: {
              message: { role: Role.ASSISTANT, text: "Hello" },
              servedBy: "fast-b",
              hops: [
                { deployment: "fast-a", kind: FailureKind.CIRCUIT_OPEN, skipped: true },
                { deployment: "fast-b", attempts: 1, reason: "served" },
              ],
            },
          },
        }),
      );
      call.end();
      return;
    case "restart":
      send(
        text("Hel"),
        event({ event: { case: "toolCall", value: { id: "call_0", name: "old" } } }),
        event({ event: { case: "restart", value: { cause: RestartCause.UPSTREAM_FAULT, reason: "connection dropped", attempt: 2 } } }),
        text("Good"),
        text("bye"),
        event({ event: { case: "final", value: { message: { role: Role.ASSISTANT, text: "Goodbye" } } } }),
      );
      call.end();
      return;
    case "interrupted":
    case "quota":
      send(text("Hello, "), text("wo"));
      call.emit("error", statusError(failureStatus(call.request.model === "quota" ? quotaFailure() : interruptedFailure())));
      return;
    case "reasoning": {
      const thinking = (value: { index?: number; text?: string; signature?: string; redactedData?: string }) =>
        event({ event: { case: "reasoning", value } });
      send(
        thinking({ text: "void" }),
        event({ event: { case: "restart", value: { attempt: 2 } } }),
        thinking({ text: "Let me " }),
        thinking({ text: "think." }),
        thinking({ signature: "sig-0" }),
        thinking({ index: 1, redactedData: "opaque" }),
        text("Hi"),
        event({
          event: {
            case: "final",
            value: { message: { role: Role.ASSISTANT, text: "Hi", reasoning: [{ text: "Let me think.", signature: "sig-0", format: "anthropic" }] } },
          },
        }),
      );
      call.end();
      return;
    }
    case "no-final":
      send(text("Hel"));
      call.end();
      return;
    case "policy":
      seenPolicy = call.request.midStream;
      send(event({ event: { case: "final", value: {} } }));
      call.end();
      return;
    case "slow":
      send(text("Hel"));
      call.on("cancelled", () => slowCancelled());
      slowStarted();
      return;
  }
  call.emit("error", { code: grpc.status.NOT_FOUND, details: `no ${call.request.model}` });
}

const callModel: grpc.handleUnaryCall<CallModelRequest, unknown> = (call, callback) => {
  if (call.request.model === "quota") callback(statusError(failureStatus(quotaFailure())));
  else callback(null, create(CallModelResponseSchema, {}));
};

function until(register: (resolve: () => void) => void, what: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server never saw ${what}`)), WAIT_FOR_SERVER_MS);
    register(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Promises of the "slow" stream's first delta and of its cancellation, as the server sees them. */
function watchSlow(): { started: Promise<void>; cancelled: Promise<void> } {
  return {
    started: until((r) => (slowStarted = r), "the first delta sent"),
    cancelled: until((r) => (slowCancelled = r), "the cancellation"),
  };
}

async function texts(stream: ModelStream, into: string[]): Promise<void> {
  for await (const e of stream) if (e.event.case === "text") into.push(e.event.value.text);
}

describe("SidecarClient.streamModel", () => {
  let server: grpc.Server;
  let client: SidecarClient;
  before(async () => {
    server = new grpc.Server();
    server.addService(sidecarServiceDefinition(), { StreamModel: streamModel, CallModel: callModel });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    client = new SidecarClient(`127.0.0.1:${port}`);
  });
  after(() => {
    client.close();
    server.forceShutdown();
  });

  it("delivers the deltas, then the final reply", async () => {
    const stream = client.streamModel({ model: "deltas", messages: [{ role: Role.USER, text: "hi" }] });
    const kinds: (string | undefined)[] = [];
    for await (const e of stream) kinds.push(e.event.case);
    assert.deepEqual(kinds, ["text", "text", "toolCall", "toolCall", "toolCall", "final"]);
    assert.equal(stream.text, "Hello");
    assert.deepEqual(
      stream.toolCalls.map((c) => [c.id, c.name, c.argumentsJson]),
      [
        ["call_1", "search", '{"q":"x"}'],
        ["call_2", "fetch", "{}"],
      ],
    );
    assert.equal(stream.final?.message?.text, "Hello");
    assert.equal(stream.final?.servedBy, "fast-b");
    assert.deepEqual(stream.final?.hops.map((h) => [h.deployment, h.skipped]), [
      ["fast-a", true],
      ["fast-b", false],
    ]);
    assert.equal(stream.restarts, 0);
  });

  it("assembles the reasoning since the last restart", async () => {
    const stream = client.streamModel({ model: "reasoning" });
    const reply = await stream.collect();
    assert.deepEqual(
      stream.reasoning.map((r) => [r.text, r.signature, r.redactedData]),
      [
        ["Let me think.", "sig-0", ""],
        ["", "", "opaque"],
      ],
    );
    const next = assistant(reply);
    assert.equal(next.reasoning[0].signature, "sig-0");
    assert.equal(next.reasoning[0].format, "anthropic");
  });

  it("collects the final reply", async () => {
    const stream = client.streamModel({ model: "deltas" });
    const reply = await stream.collect();
    assert.equal(reply.message?.text, "Hello");
    assert.equal(reply.servedBy, "fast-b");
    assert.equal(stream.text, "Hello");
  });

  it("voids what came before a restart", async () => {
    const stream = client.streamModel({ model: "restart" });
    const kinds: (string | undefined)[] = [];
    for await (const e of stream) {
      if (e.event.case === "restart") {
        assert.equal(e.event.value.cause, RestartCause.UPSTREAM_FAULT);
        assert.equal(e.event.value.attempt, 2);
        assert.equal(stream.text, "");
        assert.deepEqual(stream.toolCalls, []);
      }
      kinds.push(e.event.case);
    }
    assert.deepEqual(kinds, ["text", "toolCall", "restart", "text", "text", "final"]);
    assert.equal(stream.text, "Goodbye");
    assert.equal(stream.restarts, 1);
    assert.equal(stream.final?.message?.text, "Goodbye");
  });

  it("rejects with STREAM_INTERRUPTED and its detail after the events before it", async () => {
    const stream = client.streamModel({ model: "interrupted" });
    const seen: string[] = [];
    const err = await texts(stream, seen).then(
      () => assert.fail("expected a rejection"),
      (e: unknown) => e,
    );
    assert.deepEqual(seen, ["Hello, ", "wo"]);
    assert.ok(err instanceof StreamInterruptedError);
    assert.ok(err instanceof SidecarError);
    assert.equal(err.kind, FailureKind.STREAM_INTERRUPTED);
    assert.equal(err.kindName, "STREAM_INTERRUPTED");
    assert.equal(err.correctable, false);
    assert.equal(err.grpcCode, grpc.status.ABORTED);
    assert.equal(err.name, "StreamInterruptedError");
    assert.equal(err.partialText, "Hello, wo");
    assert.equal(err.streamDetail?.reason, "connection dropped");
    assert.equal(err.streamDetail?.deltasSent, 2);
    assert.deepEqual(err.hops.map((h) => [h.deployment, h.kind, h.skipped]), [
      ["fast-a", FailureKind.CIRCUIT_OPEN, true],
      ["fast-b", FailureKind.STREAM_INTERRUPTED, false],
    ]);
    assert.equal(stream.text, "Hello, wo");
  });

  it("rejects with the very error callModel rejects with", async () => {
    const unary = await client.callModel({ model: "quota" }).catch((e: unknown) => e);
    const stream = client.streamModel({ model: "quota" });
    const streamed = await stream.collect().catch((e: unknown) => e);
    assert.ok(unary instanceof SidecarError && streamed instanceof SidecarError);
    assert.equal(streamed.constructor, unary.constructor);
    assert.equal(streamed.kind, FailureKind.QUOTA_EXHAUSTED);
    assert.equal(streamed.kind, unary.kind);
    assert.equal(streamed.grpcCode, grpc.status.RESOURCE_EXHAUSTED);
    assert.equal(streamed.grpcCode, unary.grpcCode);
    assert.equal(streamed.retryAfterMs, 7000);
    assert.equal(streamed.http?.statusCode, 429);
    assert.equal(streamed.explanation, unary.explanation);
    assert.deepEqual(streamed.hops, []);
    assert.equal(stream.text, "Hello, wo");
  });

  it("rejects collect() with SYSTEM when the stream ends without its final event", async () => {
    const err = await client.streamModel({ model: "no-final" }).collect().catch((e: unknown) => e);
    assert.ok(err instanceof SidecarError);
    assert.equal(err.kind, FailureKind.SYSTEM);
    assert.equal(err.message, NO_FINAL_MESSAGE);
  });

  it("sends the mid-stream policy", async () => {
    await client.streamModel({ model: "policy", midStream: MidStreamPolicy.FAIL }).collect();
    assert.equal(seenPolicy, MidStreamPolicy.FAIL);
  });

  it("cancels the RPC when the loop is left", async () => {
    const { cancelled } = watchSlow();
    const stream = client.streamModel({ model: "slow" });
    for await (const e of stream) {
      assert.equal(e.event.case, "text");
      break;
    }
    await cancelled;
    const err = await stream.collect().catch((e: unknown) => e);
    assert.ok(err instanceof SidecarError);
    assert.equal(err.kind, FailureKind.JOB_CANCELLED);
  });

  it("cancels the RPC on cancel(), rejecting a pending read with JOB_CANCELLED", async () => {
    const { started, cancelled } = watchSlow();
    const stream = client.streamModel({ model: "slow" });
    const reading = stream.collect().catch((e: unknown) => e);
    await started;
    stream.cancel();
    const err = await reading;
    assert.ok(err instanceof SidecarError);
    assert.equal(err.kind, FailureKind.JOB_CANCELLED);
    assert.equal(err.grpcCode, grpc.status.CANCELLED);
    await cancelled;
  });

  it("cancels the RPC when the signal aborts, rejecting with its reason", async () => {
    const { started, cancelled } = watchSlow();
    const controller = new AbortController();
    const reading = client.streamModel({ model: "slow" }, { signal: controller.signal }).collect().catch((e: unknown) => e);
    await started;
    controller.abort();
    const err = await reading;
    assert.ok(err instanceof Error);
    assert.equal(err.name, "AbortError");
    await cancelled;
  });

  it("rejects at once for an already aborted signal, without a call", async () => {
    const reason = new Error("stop");
    await assert.rejects(client.streamModel({ model: "deltas" }, { signal: AbortSignal.abort(reason) }).collect(), reason);
  });
});

describe("StreamInterruptedError", () => {
  it("is what a STREAM_INTERRUPTED status becomes, and only that", () => {
    const err = fromServiceError(serviceError(failureStatus(interruptedFailure())));
    assert.ok(err instanceof StreamInterruptedError);
    assert.equal(err.partialText, "Hello, wo");
    assert.deepEqual(err.hops.map((h) => h.reason), ["circuit open", "cut"]);
    assert.ok(!(fromServiceError(serviceError(failureStatus(quotaFailure()))) instanceof StreamInterruptedError));
    assert.ok(SidecarError.fromFailure(interruptedFailure()) instanceof StreamInterruptedError);
  });
});
