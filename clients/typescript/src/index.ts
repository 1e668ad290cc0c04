/**
 * The TypeScript client of the sidecar.v1 contract.
 *
 *   const sidecar = new SidecarClient(process.env.SIDECAR_ADDR);
 *   const reply = await sidecar.callModel({ model: "fast", messages }, { timeoutMs: 30_000 });
 *   const outcome = await sidecar.runToolCall(reply.message!.toolCalls[0]);
 *   messages.push(toolMessage([outcome]));   // or outcome.toOpenAI() / outcome.toAnthropic()
 *
 *   for await (const event of sidecar.streamModel({ model: "fast", messages })) { ... }
 *
 *   messages.push(user("what is this?", { image: { path: "shot.png" } }));   // content.ts
 *   messages.push(assistant(reply));                                        // reasoning passed back unchanged
 *   { model, messages, onOverflow: compactOnOverflow("tool_results") }     // overflow.ts: compact what no longer fits
 *   messages = [...compacted(messages, reply), assistant(reply)];          // adopt the compacted history
 *
 * CallModel and StreamModel failures reject with a SidecarError rebuilt from the Failure in the
 * `grpc-status-details-bin` trailer, one class per kind (`err instanceof QuotaExhaustedError`,
 * `err instanceof CorrectableError`); a tool's failure is an outcome, not a rejection.
 */
export {
  ADDRESS_ENV,
  SidecarClient,
  callUnary,
  serverStreamOpener,
  sidecarServiceDefinition,
  toolDefinitions,
  type CallModelInput,
  type CallOptions,
  type ClassifyFailureInput,
  type ExecuteToolInput,
  type SidecarClientOptions,
} from "./client.js";
export {
  CORRECTABLE_LINE,
  CircuitOpenError,
  ContextOverflowError,
  CorrectableError,
  ERROR_DOMAIN,
  ExternalServiceError,
  GuardrailError,
  InvalidInputError,
  JobCancelledError,
  JobTimeoutError,
  JsonParseError,
  ModelNotFoundError,
  OutputTruncatedError,
  PermissionDeniedError,
  ProviderRefusalError,
  QuotaExhaustedError,
  ResourceNotFoundError,
  ResponseValidationError,
  SidecarError,
  SpendCapExceededError,
  StreamInterruptedError,
  SystemFailureError,
  TokenEstimateExceedsLimitError,
  UNCORRECTABLE_LINE,
  UnauthorizedError,
  UncorrectableError,
  UpstreamRetriesExhaustedError,
  UpstreamThrottleError,
  errorClass,
  explain,
  fallbackKind,
  fromServiceError,
  fromStatus,
  grpcCodeName,
  isCorrectableKind,
  isSidecarError,
  kindFromName,
  kindName,
  type FailureDetail,
  type SidecarErrorInit,
} from "./errors.js";
export {
  MEDIA_TYPE_PDF,
  MEDIA_TYPE_TEXT,
  assistant,
  cacheBreakpoint,
  documentPart,
  imagePart,
  mediaTypeOf,
  providerOptions,
  reasoning,
  textPart,
  toolChoice,
  toolResult,
  toolResults,
  user,
  type CacheInput,
  type Detail,
  type DocumentInput,
  type DocumentSpec,
  type Effort,
  type ImageInput,
  type ImageSpec,
  type UserContent,
} from "./content.js";
export { compactOnOverflow, compacted, failOnOverflow, type Strategy } from "./overflow.js";
export { ModelStream, NO_FINAL_MESSAGE } from "./stream.js";
export { ToolOutcome, toolMessage, type AnthropicToolResult, type OpenAIToolMessage } from "./tool.js";
export * from "./gen/sidecar/v1/sidecar_pb.js";
