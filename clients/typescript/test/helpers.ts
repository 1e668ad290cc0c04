import { create, toBinary } from "@bufbuild/protobuf";
import { anyPack, DurationSchema } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";
import { FailureKind, FailureSchema, type Failure } from "../src/gen/sidecar/v1/sidecar_pb.js";
import { ERROR_DOMAIN, UNCORRECTABLE_LINE, kindName } from "../src/errors.js";
import {
  ERROR_INFO_TYPE,
  RETRY_INFO_TYPE,
  STATUS_DETAILS_KEY,
  encodeErrorInfo,
  encodeRetryInfo,
  encodeStatus,
  packBytes,
  type RpcStatus,
} from "../src/status.js";

/** The failure wire format's status code by kind. */
export const CODE_FOR_KIND: Partial<Record<FailureKind, grpc.status>> = {
  [FailureKind.INVALID_INPUT]: grpc.status.INVALID_ARGUMENT,
  [FailureKind.MODEL_NOT_FOUND]: grpc.status.NOT_FOUND,
  [FailureKind.QUOTA_EXHAUSTED]: grpc.status.RESOURCE_EXHAUSTED,
  [FailureKind.SPEND_CAP_EXCEEDED]: grpc.status.RESOURCE_EXHAUSTED,
  [FailureKind.UPSTREAM_RETRIES_EXHAUSTED]: grpc.status.UNAVAILABLE,
  [FailureKind.EXTERNAL_SERVICE]: grpc.status.UNAVAILABLE,
  [FailureKind.CIRCUIT_OPEN]: grpc.status.UNAVAILABLE,
  [FailureKind.JOB_TIMEOUT]: grpc.status.DEADLINE_EXCEEDED,
  [FailureKind.JOB_CANCELLED]: grpc.status.CANCELLED,
  [FailureKind.TOKEN_ESTIMATE_EXCEEDS_LIMIT]: grpc.status.FAILED_PRECONDITION,
  [FailureKind.CONTEXT_OVERFLOW]: grpc.status.FAILED_PRECONDITION,
  [FailureKind.PROVIDER_REFUSAL]: grpc.status.FAILED_PRECONDITION,
  [FailureKind.OUTPUT_TRUNCATED]: grpc.status.FAILED_PRECONDITION,
  [FailureKind.UNAUTHORIZED]: grpc.status.FAILED_PRECONDITION,
  [FailureKind.JSON_PARSE]: grpc.status.ABORTED,
  [FailureKind.STREAM_INTERRUPTED]: grpc.status.ABORTED,
  [FailureKind.SYSTEM]: grpc.status.INTERNAL,
};

export function quotaFailure(): Failure {
  const message = "The provider account of openai is out of credit.";
  return create(FailureSchema, {
    kind: FailureKind.QUOTA_EXHAUSTED,
    correctable: false,
    message,
    explanation: `${message}\n${UNCORRECTABLE_LINE}`,
    http: {
      statusCode: 429,
      service: "openai",
      endpoint: "/v1/chat/completions",
      body: '{"error":{"code":"insufficient_quota"}}',
      retryAfterRaw: "7",
    },
    retryAfter: { seconds: 7n },
    attempts: 1,
    detail: { case: "provider", value: { provider: "openai", account: "default", model: "fast" } },
  });
}

/** The google.rpc.Status a sidecar sends for a failure. */
export function failureStatus(failure: Failure): RpcStatus {
  const details = [
    anyPack(FailureSchema, failure),
    packBytes(ERROR_INFO_TYPE, encodeErrorInfo({ reason: kindName(failure.kind), domain: ERROR_DOMAIN, metadata: { model: "fast" } })),
  ];
  if (failure.retryAfter) {
    details.push(packBytes(RETRY_INFO_TYPE, encodeRetryInfo({ retryDelay: create(DurationSchema, failure.retryAfter) })));
  }
  return { code: CODE_FOR_KIND[failure.kind] ?? grpc.status.INTERNAL, message: failure.message, details };
}

/** A grpc-js server error object carrying status in its trailer. */
export function statusError(status: RpcStatus): grpc.StatusObject {
  const metadata = new grpc.Metadata();
  metadata.set(STATUS_DETAILS_KEY, Buffer.from(encodeStatus(status)));
  return { code: status.code, details: status.message, metadata };
}

/** A grpc-js ServiceError as a client sees it, for tests without a server. */
export function serviceError(status: RpcStatus): grpc.ServiceError {
  const s = statusError(status);
  return Object.assign(new Error(`${s.code} ${grpc.status[s.code]}: ${s.details}`), s);
}

export { toBinary };
