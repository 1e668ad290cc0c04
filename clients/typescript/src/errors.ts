/**
 * SidecarError: a sidecar failure as a client sees it, one class per kind.
 *
 *   SidecarError                     kind, correctable, message, explanation, http, retryAfterMs,
 *   ├── CorrectableError             detail, attempts, hops, grpcCode, reason, failure, status
 *   │   └── InvalidInputError, ResourceNotFoundError, GuardrailError, JsonParseError,
 *   │       ResponseValidationError
 *   └── UncorrectableError
 *       └── ExternalServiceError, UpstreamThrottleError, UnauthorizedError, PermissionDeniedError,
 *           SystemFailureError, CircuitOpenError, UpstreamRetriesExhaustedError, QuotaExhaustedError,
 *           SpendCapExceededError, ModelNotFoundError, ProviderRefusalError,
 *           TokenEstimateExceedsLimitError, ContextOverflowError, OutputTruncatedError,
 *           JobTimeoutError, JobCancelledError, StreamInterruptedError (+ streamDetail, partialText)
 *
 * so `err instanceof QuotaExhaustedError` (or CorrectableError) tells a failure from the others, as
 * the Python client's exceptions do. Which branch a kind sits under is the contract's word: the
 * kinds FailureKind marks `(sidecar.v1.correctable)`, read with getOption from the generated code,
 * as are the two retry lines (the enum's `correctable_line` and `uncorrectable_line`).
 *
 * CallModel failures arrive as a failed RPC whose `grpc-status-details-bin`
 * trailer holds a google.rpc.Status packing a sidecar.v1.Failure, one
 * google.rpc.ErrorInfo (reason = kind name, domain "sidecar") and RetryInfo
 * when a wait is known. fromServiceError rebuilds the error from the packed
 * Failure, falling back to ErrorInfo + the status message, and then to the
 * bare gRPC status for a failure that is not the sidecar's (its kind by the
 * status code: see fallbackKind). A kind this client does not know (a newer
 * sidecar's) is a SystemFailureError, its `kind` kept.
 */
import { getOption } from "@bufbuild/protobuf";
import { anyIs, anyUnpack, type Any } from "@bufbuild/protobuf/wkt";
import { Metadata, status as GrpcStatus, type ServiceError } from "@grpc/grpc-js";
import {
  FailureKind,
  FailureKindSchema,
  FailureSchema,
  correctable as correctableOption,
  correctable_line,
  uncorrectable_line,
  type Failure,
  type Hop,
  type HttpDetail,
  type StreamDetail,
} from "./gen/sidecar/v1/sidecar_pb.js";
import {
  ERROR_INFO_TYPE,
  RETRY_INFO_TYPE,
  STATUS_DETAILS_KEY,
  anyTypeName,
  decodeErrorInfo,
  decodeRetryInfo,
  decodeStatus,
  durationMs,
  type ErrorInfo,
  type RpcStatus,
} from "./status.js";

/** The google.rpc.ErrorInfo domain of every sidecar failure. */
export const ERROR_DOMAIN = "sidecar";

/** The line the model reads after a correctable failure's message (the contract's `correctable_line`). */
export const CORRECTABLE_LINE: string = getOption(FailureKindSchema, correctable_line);
/** The line the model reads after an uncorrectable failure's message (the contract's `uncorrectable_line`). */
export const UNCORRECTABLE_LINE: string = getOption(FailureKindSchema, uncorrectable_line);

const KIND_PREFIX = "FAILURE_KIND_";

/** The kinds the contract marks `(sidecar.v1.correctable)`. */
const CORRECTABLE_KINDS = new Set<FailureKind>(
  FailureKindSchema.values.filter((value) => getOption(value, correctableOption)).map((value) => value.number),
);

/** The kind's name without the FAILURE_KIND_ prefix, e.g. "QUOTA_EXHAUSTED". */
export function kindName(kind: FailureKind): string {
  return FailureKind[kind] ?? `UNKNOWN_${kind}`;
}

/** Parses a kind name, with or without the FAILURE_KIND_ prefix; undefined when unknown. */
export function kindFromName(name: string): FailureKind | undefined {
  let key = name.trim().toUpperCase();
  if (key.startsWith(KIND_PREFIX)) key = key.slice(KIND_PREFIX.length);
  const value = (FailureKind as unknown as Record<string, unknown>)[key];
  return typeof value === "number" ? (value as FailureKind) : undefined;
}

/** Whether a kind is correctable: one the contract marks `(sidecar.v1.correctable)`. */
export function isCorrectableKind(kind: FailureKind): boolean {
  return CORRECTABLE_KINDS.has(kind);
}

/** A message and the retry line the model reads. */
export function explain(message: string, correctable: boolean): string {
  return `${message}\n${correctable ? CORRECTABLE_LINE : UNCORRECTABLE_LINE}`;
}

/** The canonical name of a gRPC status code ("RESOURCE_EXHAUSTED"). */
export function grpcCodeName(code: number): string {
  return (GrpcStatus as unknown as Record<number, string>)[code] ?? `CODE_${code}`;
}

/** The structured detail of a Failure: its `detail` oneof. */
export type FailureDetail = Failure["detail"];

export interface SidecarErrorInit {
  kind: FailureKind;
  correctable: boolean;
  message: string;
  explanation: string;
  http?: HttpDetail;
  retryAfterMs?: number;
  detail?: FailureDetail;
  attempts?: number;
  grpcCode: number;
  reason?: string;
  failure?: Failure;
  status?: RpcStatus;
  metadata?: Metadata;
  cause?: unknown;
}

/**
 * A sidecar failure: the Failure of a failed CallModel, of a failed
 * ExecuteTool outcome (grpcCode OK), or of any other failed RPC (kind by
 * status code when the status carries no sidecar failure: see fallbackKind).
 */
export class SidecarError extends Error {
  override readonly name: string = "SidecarError";
  /** What went wrong; for an RPC failure that is not a sidecar failure, fallbackKind(grpcCode). */
  readonly kind: FailureKind;
  /** Whether a corrected call can help (true) or only another approach (false). */
  readonly correctable: boolean;
  /** The failure's message, a newline and the retry line: what the model reads. */
  readonly explanation: string;
  /** What the upstream answered; undefined when no response came back. */
  readonly http: HttpDetail | undefined;
  /** How long to wait before the same call could succeed, in ms; undefined when unknown. */
  readonly retryAfterMs: number | undefined;
  /** The kind's structured detail ({case: "provider", value: ProviderDetail}, ...). */
  readonly detail: FailureDetail;
  /** Upstream attempts made before the failure. */
  readonly attempts: number;
  /** When the model id is a route: every deployment tried, in order (the last ended so); else []. */
  readonly hops: Hop[];
  /** The gRPC status code of the failed RPC (grpc.status); OK for a tool outcome's failure. */
  readonly grpcCode: number;
  /** The google.rpc.ErrorInfo reason; "" when there was none. */
  readonly reason: string;
  /** The sidecar.v1.Failure itself, when the status carried one. */
  readonly failure: Failure | undefined;
  /** The google.rpc.Status of the failed RPC, when it was sent. */
  readonly status: RpcStatus | undefined;
  /** The trailing metadata of the failed RPC. */
  readonly metadata: Metadata | undefined;

  constructor(init: SidecarErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.kind = init.kind;
    this.correctable = init.correctable;
    this.explanation = init.explanation;
    this.http = init.http;
    this.retryAfterMs = init.retryAfterMs;
    this.detail = init.detail ?? { case: undefined };
    this.attempts = init.attempts ?? 0;
    this.hops = init.failure?.hops ?? [];
    this.grpcCode = init.grpcCode;
    this.reason = init.reason ?? "";
    this.failure = init.failure;
    this.status = init.status;
    this.metadata = init.metadata;
  }

  /** The kind without its prefix, e.g. "QUOTA_EXHAUSTED". */
  get kindName(): string {
    return kindName(this.kind);
  }

  /** The gRPC status code's name, e.g. "RESOURCE_EXHAUSTED". */
  get grpcCodeName(): string {
    return grpcCodeName(this.grpcCode);
  }

  /** Turns a sidecar.v1.Failure (a tool outcome's, a ClassifyFailure answer) into an error with grpcCode OK. */
  static fromFailure(failure: Failure, rest: Partial<SidecarErrorInit> = {}): SidecarError {
    const message = failure.message || rest.message || "";
    return errorOf({
      grpcCode: GrpcStatus.OK,
      ...rest,
      kind: failure.kind,
      correctable: failure.correctable,
      message,
      explanation: failure.explanation || explain(message, failure.correctable),
      http: failure.http,
      retryAfterMs: failure.retryAfter ? durationMs(failure.retryAfter) : rest.retryAfterMs,
      detail: failure.detail,
      attempts: failure.attempts,
      failure,
    });
  }
}

/** A corrected call may succeed: the caller's input was wrong. */
export class CorrectableError extends SidecarError {
  override readonly name: string = "CorrectableError";
}

/** Only another approach can help. */
export class UncorrectableError extends SidecarError {
  override readonly name: string = "UncorrectableError";
}

/** The class of a kind: one the contract marks correctable is a CorrectableError, any other an UncorrectableError. */
function branch(kind: FailureKind): typeof SidecarError {
  return isCorrectableKind(kind) ? CorrectableError : UncorrectableError;
}

/** INVALID_INPUT: a parameter broke a rule. */
export class InvalidInputError extends branch(FailureKind.INVALID_INPUT) {
  static readonly kind = FailureKind.INVALID_INPUT;
  override readonly name: string = "InvalidInputError";
}

/** RESOURCE_NOT_FOUND: a well-formed identifier names nothing. */
export class ResourceNotFoundError extends branch(FailureKind.RESOURCE_NOT_FOUND) {
  static readonly kind = FailureKind.RESOURCE_NOT_FOUND;
  override readonly name: string = "ResourceNotFoundError";
}

/** GUARDRAIL: a guardrail refused the call. */
export class GuardrailError extends branch(FailureKind.GUARDRAIL) {
  static readonly kind = FailureKind.GUARDRAIL;
  override readonly name: string = "GuardrailError";
}

/** JSON_PARSE: the model's reply was not the JSON object asked for. */
export class JsonParseError extends branch(FailureKind.JSON_PARSE) {
  static readonly kind = FailureKind.JSON_PARSE;
  override readonly name: string = "JsonParseError";
}

/** RESPONSE_VALIDATION: the model's reply left required fields empty. */
export class ResponseValidationError extends branch(FailureKind.RESPONSE_VALIDATION) {
  static readonly kind = FailureKind.RESPONSE_VALIDATION;
  override readonly name: string = "ResponseValidationError";
}

/** EXTERNAL_SERVICE: the service is down, failed, or could not be reached. */
export class ExternalServiceError extends branch(FailureKind.EXTERNAL_SERVICE) {
  static readonly kind = FailureKind.EXTERNAL_SERVICE;
  override readonly name: string = "ExternalServiceError";
}

/** UPSTREAM_THROTTLE: the service is throttling us. */
export class UpstreamThrottleError extends branch(FailureKind.UPSTREAM_THROTTLE) {
  static readonly kind = FailureKind.UPSTREAM_THROTTLE;
  override readonly name: string = "UpstreamThrottleError";
}

/** UNAUTHORIZED: the service rejected the sidecar's credentials. */
export class UnauthorizedError extends branch(FailureKind.UNAUTHORIZED) {
  static readonly kind = FailureKind.UNAUTHORIZED;
  override readonly name: string = "UnauthorizedError";
}

/** PERMISSION_DENIED: the person the work runs for lacks access. */
export class PermissionDeniedError extends branch(FailureKind.PERMISSION_DENIED) {
  static readonly kind = FailureKind.PERMISSION_DENIED;
  override readonly name: string = "PermissionDeniedError";
}

/** SYSTEM: an unexpected internal error (also the class of a kind this client does not know). */
export class SystemFailureError extends branch(FailureKind.SYSTEM) {
  static readonly kind = FailureKind.SYSTEM;
  override readonly name: string = "SystemFailureError";
}

/** CIRCUIT_OPEN: the service's circuit is open; calls are refused until it recovers. */
export class CircuitOpenError extends branch(FailureKind.CIRCUIT_OPEN) {
  static readonly kind = FailureKind.CIRCUIT_OPEN;
  override readonly name: string = "CircuitOpenError";
}

/** UPSTREAM_RETRIES_EXHAUSTED: rate limits, overloads or transient faults outlasted the retry budget. */
export class UpstreamRetriesExhaustedError extends branch(FailureKind.UPSTREAM_RETRIES_EXHAUSTED) {
  static readonly kind = FailureKind.UPSTREAM_RETRIES_EXHAUSTED;
  override readonly name: string = "UpstreamRetriesExhaustedError";
}

/** QUOTA_EXHAUSTED: the provider account is out of money. */
export class QuotaExhaustedError extends branch(FailureKind.QUOTA_EXHAUSTED) {
  static readonly kind = FailureKind.QUOTA_EXHAUSTED;
  override readonly name: string = "QuotaExhaustedError";
}

/** SPEND_CAP_EXCEEDED: the workflow's recorded spend reached its cap. */
export class SpendCapExceededError extends branch(FailureKind.SPEND_CAP_EXCEEDED) {
  static readonly kind = FailureKind.SPEND_CAP_EXCEEDED;
  override readonly name: string = "SpendCapExceededError";
}

/** MODEL_NOT_FOUND: the model id is not in the catalog. */
export class ModelNotFoundError extends branch(FailureKind.MODEL_NOT_FOUND) {
  static readonly kind = FailureKind.MODEL_NOT_FOUND;
  override readonly name: string = "ModelNotFoundError";
}

/** PROVIDER_REFUSAL: the provider declined the call (content filter, refusal). */
export class ProviderRefusalError extends branch(FailureKind.PROVIDER_REFUSAL) {
  static readonly kind = FailureKind.PROVIDER_REFUSAL;
  override readonly name: string = "ProviderRefusalError";
}

/** TOKEN_ESTIMATE_EXCEEDS_LIMIT: the estimated conversation does not fit the context window. */
export class TokenEstimateExceedsLimitError extends branch(FailureKind.TOKEN_ESTIMATE_EXCEEDS_LIMIT) {
  static readonly kind = FailureKind.TOKEN_ESTIMATE_EXCEEDS_LIMIT;
  override readonly name: string = "TokenEstimateExceedsLimitError";
}

/** CONTEXT_OVERFLOW: the provider said the context is too long. */
export class ContextOverflowError extends branch(FailureKind.CONTEXT_OVERFLOW) {
  static readonly kind = FailureKind.CONTEXT_OVERFLOW;
  override readonly name: string = "ContextOverflowError";
}

/** OUTPUT_TRUNCATED: the reply was cut off at the output limit, even at the maximum budget. */
export class OutputTruncatedError extends branch(FailureKind.OUTPUT_TRUNCATED) {
  static readonly kind = FailureKind.OUTPUT_TRUNCATED;
  override readonly name: string = "OutputTruncatedError";
}

/** JOB_TIMEOUT: the caller's deadline ends before the call could. */
export class JobTimeoutError extends branch(FailureKind.JOB_TIMEOUT) {
  static readonly kind = FailureKind.JOB_TIMEOUT;
  override readonly name: string = "JobTimeoutError";
}

/** JOB_CANCELLED: the caller cancelled the call. */
export class JobCancelledError extends branch(FailureKind.JOB_CANCELLED) {
  static readonly kind = FailureKind.JOB_CANCELLED;
  override readonly name: string = "JobCancelledError";
}

/**
 * STREAM_INTERRUPTED: a stream was cut after deltas had reached the caller and was not restarted
 * (the call's midStream policy, or no retry left). `partialText` is what had been sent. Retry at
 * a higher level, or keep the partial output.
 */
export class StreamInterruptedError extends branch(FailureKind.STREAM_INTERRUPTED) {
  static readonly kind = FailureKind.STREAM_INTERRUPTED;
  override readonly name: string = "StreamInterruptedError";

  /** What the stream had sent: partialText, reason, deltasSent. */
  get streamDetail(): StreamDetail | undefined {
    return this.detail.case === "stream" ? this.detail.value : undefined;
  }

  /** The text deltas already sent, joined. */
  get partialText(): string {
    return this.streamDetail?.partialText ?? "";
  }
}

/** The class of each kind's errors. */
const BY_KIND = new Map<FailureKind, typeof SidecarError>(
  [
    InvalidInputError,
    ResourceNotFoundError,
    GuardrailError,
    JsonParseError,
    ResponseValidationError,
    ExternalServiceError,
    UpstreamThrottleError,
    UnauthorizedError,
    PermissionDeniedError,
    SystemFailureError,
    CircuitOpenError,
    UpstreamRetriesExhaustedError,
    QuotaExhaustedError,
    SpendCapExceededError,
    ModelNotFoundError,
    ProviderRefusalError,
    TokenEstimateExceedsLimitError,
    ContextOverflowError,
    OutputTruncatedError,
    JobTimeoutError,
    JobCancelledError,
    StreamInterruptedError,
  ].map((cls): [FailureKind, typeof SidecarError] => [cls.kind, cls]),
);

/** The class of a kind's errors; SystemFailureError for UNSPECIFIED or a kind this client does not know. */
export function errorClass(kind: FailureKind): typeof SidecarError {
  return BY_KIND.get(kind) ?? SystemFailureError;
}

/** The error of a failure's kind: an instance of errorClass(kind). */
function errorOf(init: SidecarErrorInit): SidecarError {
  return new (errorClass(init.kind))(init);
}

/** Whether err is a SidecarError. */
export function isSidecarError(err: unknown): err is SidecarError {
  return err instanceof SidecarError;
}

/**
 * Rebuilds the SidecarError of a failed grpc-js call from its
 * `grpc-status-details-bin` trailer. A SidecarError is returned as it is.
 */
export function fromServiceError(err: unknown): SidecarError {
  if (err instanceof SidecarError) return err;
  const se = err as Partial<ServiceError> | undefined;
  const code = typeof se?.code === "number" ? se.code : GrpcStatus.UNKNOWN;
  const metadata = se?.metadata instanceof Metadata ? se.metadata : undefined;
  const message = typeof se?.details === "string" ? se.details : err instanceof Error ? err.message : String(err);
  let status: RpcStatus | undefined;
  const raw = metadata?.get(STATUS_DETAILS_KEY)[0];
  if (raw !== undefined) {
    try {
      status = decodeStatus(typeof raw === "string" ? Buffer.from(raw, "base64") : raw);
    } catch {
      status = undefined;
    }
  }
  return fromStatus(code, message, status, metadata, err);
}

/** Rebuilds a SidecarError from a gRPC code, status message and (optional) google.rpc.Status. */
export function fromStatus(
  code: number,
  message: string,
  status?: RpcStatus,
  metadata?: Metadata,
  cause?: unknown,
): SidecarError {
  const details = status?.details ?? [];
  let failure: Failure | undefined;
  let info: ErrorInfo | undefined;
  let retryAfterMs: number | undefined;
  for (const any of details) {
    if (!failure && anyIs(any, FailureSchema)) failure = safely(() => anyUnpack(any, FailureSchema));
    else if (!info && anyTypeName(any) === ERROR_INFO_TYPE) info = safely(() => decodeErrorInfo(any.value));
    else if (retryAfterMs === undefined && anyTypeName(any) === RETRY_INFO_TYPE) {
      const delay = safely(() => decodeRetryInfo(any.value))?.retryDelay;
      if (delay) retryAfterMs = durationMs(delay);
    }
  }
  const rest = { grpcCode: code, reason: info?.reason ?? "", status, metadata, cause };
  if (failure) {
    return SidecarError.fromFailure(failure, { ...rest, message, retryAfterMs });
  }
  let kind = fallbackKind(code);
  if (info && info.domain === ERROR_DOMAIN) kind = kindFromName(info.reason) ?? kind;
  const correctable = isCorrectableKind(kind);
  const text = message || grpcCodeName(code);
  return errorOf({
    ...rest,
    kind,
    correctable,
    message: text,
    explanation: explain(text, correctable),
    retryAfterMs,
  });
}

/**
 * The kind of a failed RPC that carries no sidecar failure, by its status
 * code (the same table in every client).
 */
export function fallbackKind(code: number): FailureKind {
  switch (code) {
    case GrpcStatus.DEADLINE_EXCEEDED:
      return FailureKind.JOB_TIMEOUT;
    case GrpcStatus.CANCELLED:
      return FailureKind.JOB_CANCELLED;
    case GrpcStatus.UNAVAILABLE:
      return FailureKind.EXTERNAL_SERVICE;
    case GrpcStatus.RESOURCE_EXHAUSTED:
    case GrpcStatus.INVALID_ARGUMENT:
      return FailureKind.INVALID_INPUT;
    default:
      return FailureKind.SYSTEM;
  }
}

function safely<T>(f: () => T): T | undefined {
  try {
    return f();
  } catch {
    return undefined;
  }
}

export type { Any };
