import {
  create,
  fromBinary,
  toBinary,
  type DescMessage,
  type DescMethodServerStreaming,
  type DescMethodUnary,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  Sidecar,
  type CallModelRequestSchema,
  type CallModelResponse,
  type ClassifyFailureRequestSchema,
  type ExecuteToolRequestSchema,
  type Failure,
  type JobSchema,
  type ModelInfo,
  type ToolCall,
  type ToolDefinition,
  type ToolInfo,
} from "./gen/sidecar/v1/sidecar_pb.js";
import { fromServiceError } from "./errors.js";
import { ModelStream } from "./stream.js";
import { ToolOutcome } from "./tool.js";

/** The environment variable read when no address is given. */
export const ADDRESS_ENV = "SIDECAR_ADDR";

/** Per-call options. */
export interface CallOptions {
  /** Aborting it cancels the call; the promise rejects with `signal.reason` (an AbortError by default). */
  signal?: AbortSignal;
  /** The call's deadline: it travels to the sidecar, which answers JOB_TIMEOUT when its work cannot finish in time. */
  deadline?: Date | number;
  /** A deadline this many milliseconds from now (the earlier of the two wins). */
  timeoutMs?: number;
  /** Request metadata, e.g. a W3C traceparent. */
  metadata?: Record<string, string>;
}

/** Options of a SidecarClient. */
export interface SidecarClientOptions {
  /** Defaults to plaintext. */
  credentials?: grpc.ChannelCredentials;
  /** grpc-js channel options. */
  channelOptions?: grpc.ChannelOptions;
  /** A deadline applied to every call that sets none, in milliseconds. */
  defaultTimeoutMs?: number;
}

/**
 * A thin grpc-js adapter over a protoc-gen-es service descriptor: one unary
 * call, with the binary codec taken from the method's own schemas.
 */
export function callUnary<I extends DescMessage, O extends DescMessage>(
  client: grpc.Client,
  method: DescMethodUnary<I, O>,
  input: MessageInitShape<I>,
  options: CallOptions = {},
): Promise<MessageShape<O>> {
  const request = create(method.input, input);
  const path = `/${method.parent.typeName}/${method.name}`;
  const signal = options.signal;
  return new Promise<MessageShape<O>>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const metadata = metadataOf(options);
    const callOptions = grpcCallOptions(options);

    const onAbort = () => call.cancel();
    const call = client.makeUnaryRequest<MessageShape<I>, MessageShape<O>>(
      path,
      (m) => Buffer.from(toBinary(method.input, m)),
      (b) => fromBinary(method.output, b),
      request,
      metadata,
      callOptions,
      (err, value) => {
        signal?.removeEventListener("abort", onAbort);
        if (err) {
          if (signal?.aborted && err.code === grpc.status.CANCELLED) reject(signal.reason);
          else reject(fromServiceError(err));
        } else resolve(value as MessageShape<O>);
      },
    );
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * The opener of one server-streaming call over a protoc-gen-es method descriptor, with the binary
 * codec taken from the method's own schemas; the deadline is reckoned when the call opens.
 * Cancellation and errors are the reader's (see ModelStream).
 */
export function serverStreamOpener<I extends DescMessage, O extends DescMessage>(
  client: grpc.Client,
  method: DescMethodServerStreaming<I, O>,
  input: MessageInitShape<I>,
  options: CallOptions = {},
): () => grpc.ClientReadableStream<MessageShape<O>> {
  const request = create(method.input, input);
  const path = `/${method.parent.typeName}/${method.name}`;
  return () =>
    client.makeServerStreamRequest<MessageShape<I>, MessageShape<O>>(
      path,
      (m) => Buffer.from(toBinary(method.input, m)),
      (b) => fromBinary(method.output, b),
      request,
      metadataOf(options),
      grpcCallOptions(options),
    );
}

function metadataOf(options: CallOptions): grpc.Metadata {
  const metadata = new grpc.Metadata();
  for (const [key, value] of Object.entries(options.metadata ?? {})) metadata.set(key, value);
  return metadata;
}

function grpcCallOptions(options: CallOptions): grpc.CallOptions {
  const callOptions: grpc.CallOptions = {};
  const deadline = earliest(options.deadline, options.timeoutMs);
  if (deadline !== undefined) callOptions.deadline = deadline;
  return callOptions;
}

function earliest(deadline: Date | number | undefined, timeoutMs: number | undefined): Date | undefined {
  const candidates: number[] = [];
  if (deadline !== undefined) candidates.push(deadline instanceof Date ? deadline.getTime() : deadline);
  if (timeoutMs !== undefined) candidates.push(Date.now() + timeoutMs);
  return candidates.length ? new Date(Math.min(...candidates)) : undefined;
}

/** The request of an ExecuteTool call: a message or its init shape. */
export type ExecuteToolInput = MessageInitShape<typeof ExecuteToolRequestSchema>;
/** The request of a CallModel call. */
export type CallModelInput = MessageInitShape<typeof CallModelRequestSchema>;
/** The request of a ClassifyFailure call. */
export type ClassifyFailureInput = MessageInitShape<typeof ClassifyFailureRequestSchema>;

/**
 * A promise-based client of the sidecar. Every failed RPC rejects with a
 * SidecarError (a CallModel failure carries the sidecar's Failure), except an
 * aborted call, which rejects with its signal's reason.
 */
export class SidecarClient {
  readonly address: string;
  private readonly grpcClient: grpc.Client;
  private readonly defaultTimeoutMs: number | undefined;

  /**
   * @param address "host:port" or a Unix socket "unix:/path/to.sock"
   *   ("unix:///path" too); $SIDECAR_ADDR when omitted.
   */
  constructor(address?: string, options: SidecarClientOptions = {}) {
    const target = (address ?? process.env[ADDRESS_ENV] ?? "").trim();
    if (!target) throw new Error(`sidecar: no address given and ${ADDRESS_ENV} is not set`);
    this.address = target;
    this.grpcClient = new grpc.Client(target, options.credentials ?? grpc.credentials.createInsecure(), options.channelOptions);
    this.defaultTimeoutMs = options.defaultTimeoutMs;
  }

  /** Closes the channel. */
  close(): void {
    this.grpcClient.close();
  }

  private call<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    input: MessageInitShape<I>,
    options: CallOptions,
  ): Promise<MessageShape<O>> {
    return callUnary(this.grpcClient, method, input, this.withDefault(options));
  }

  private withDefault(options: CallOptions): CallOptions {
    return options.deadline === undefined && options.timeoutMs === undefined && this.defaultTimeoutMs !== undefined
      ? { ...options, timeoutMs: this.defaultTimeoutMs }
      : options;
  }

  /**
   * Runs one tool call. A tool's failure does not reject: it comes back as a
   * ToolOutcome whose `failure` is set. The promise rejects only when the RPC
   * fails (a malformed request: INVALID_ARGUMENT; the sidecar unreachable; the
   * deadline; an abort).
   */
  async executeTool(request: ExecuteToolInput, options: CallOptions = {}): Promise<ToolOutcome> {
    const response = await this.call(Sidecar.method.executeTool, request, options);
    return new ToolOutcome(response, request.callId ?? "", request.tool ?? "");
  }

  /** Runs a tool call the model made, under job (optional). */
  runToolCall(call: ToolCall, job?: MessageInitShape<typeof JobSchema>, options: CallOptions = {}): Promise<ToolOutcome> {
    return this.executeTool({ tool: call.name, argumentsJson: call.argumentsJson, callId: call.id, job }, options);
  }

  /** Sends a conversation to a catalog model; rejects with a SidecarError when no reply can be produced. */
  callModel(request: CallModelInput, options: CallOptions = {}): Promise<CallModelResponse> {
    return this.call(Sidecar.method.callModel, request, options);
  }

  /**
   * CallModel, streamed: the reply as events, read with `for await` (breaking out cancels the
   * RPC) or `collect()` for the final reply. The call starts when the stream is first read; the
   * deadline (timeoutMs, or the client's default) counts from then and bounds the whole stream.
   * A restart event voids what came before it; a failure rejects the iteration with the
   * SidecarError callModel would reject with, after the events before it.
   */
  streamModel(request: CallModelInput, options: CallOptions = {}): ModelStream {
    const withDefault = this.withDefault(options);
    return new ModelStream(serverStreamOpener(this.grpcClient, Sidecar.method.streamModel, request, withDefault), options.signal);
  }

  /**
   * Maps what an agent's own tool saw onto the Failure the sidecar would have
   * produced (kind UNSPECIFIED for a success or a granted pre-check). Use
   * SidecarError.fromFailure to handle the answer as an error.
   */
  classifyFailure(request: ClassifyFailureInput, options: CallOptions = {}): Promise<Failure> {
    return this.call(Sidecar.method.classifyFailure, request, options);
  }

  /** The configured tools, with schemas ready for a model. */
  async listTools(options: CallOptions = {}): Promise<ToolInfo[]> {
    return (await this.call(Sidecar.method.listTools, {}, options)).tools;
  }

  /** The model catalog. */
  async listModels(options: CallOptions = {}): Promise<ModelInfo[]> {
    return (await this.call(Sidecar.method.listModels, {}, options)).models;
  }
}

/** The definitions of tools, ready for a CallModel request. */
export function toolDefinitions(tools: readonly ToolInfo[]): ToolDefinition[] {
  return tools.flatMap((t) => (t.definition ? [t.definition] : []));
}

/**
 * A grpc-js service definition of sidecar.v1.Sidecar built from the same
 * descriptor, for in-process test servers.
 */
export function sidecarServiceDefinition(): grpc.ServiceDefinition {
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const method of Sidecar.methods) {
    definition[method.name] = {
      path: `/${Sidecar.typeName}/${method.name}`,
      requestStream: method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming",
      responseStream: method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming",
      requestSerialize: (m: unknown) => Buffer.from(toBinary(method.input, create(method.input, m as MessageInitShape<DescMessage>))),
      requestDeserialize: (b: Buffer) => fromBinary(method.input, b),
      responseSerialize: (m: unknown) => Buffer.from(toBinary(method.output, create(method.output, m as MessageInitShape<DescMessage>))),
      responseDeserialize: (b: Buffer) => fromBinary(method.output, b),
    };
  }
  return definition;
}
