import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { FailureKind, FailureSchema } from "../src/gen/sidecar/v1/sidecar_pb.js";
import {
  CORRECTABLE_LINE,
  CorrectableError,
  ERROR_DOMAIN,
  ExternalServiceError,
  JsonParseError,
  QuotaExhaustedError,
  SidecarError,
  StreamInterruptedError,
  SystemFailureError,
  UNCORRECTABLE_LINE,
  UncorrectableError,
  errorClass,
  explain,
  fromServiceError,
  fromStatus,
  isCorrectableKind,
  kindFromName,
  kindName,
} from "../src/errors.js";
import {
  ERROR_INFO_TYPE,
  RETRY_INFO_TYPE,
  decodeErrorInfo,
  decodeStatus,
  encodeErrorInfo,
  encodeRetryInfo,
  encodeStatus,
  packBytes,
} from "../src/status.js";
import { failureStatus, quotaFailure, serviceError } from "./helpers.js";

describe("fromServiceError", () => {
  it("rebuilds every field from the packed Failure", () => {
    const failure = quotaFailure();
    const err = fromServiceError(serviceError(failureStatus(failure)));

    assert.ok(err instanceof SidecarError);
    assert.ok(err instanceof Error);
    assert.equal(err.kind, FailureKind.QUOTA_EXHAUSTED);
    assert.equal(err.kindName, "QUOTA_EXHAUSTED");
    assert.equal(err.correctable, false);
    assert.equal(err.message, failure.message);
    assert.equal(err.explanation, failure.explanation);
    assert.equal(err.http?.statusCode, 429);
    assert.equal(err.http?.service, "openai");
    assert.equal(err.http?.endpoint, "/v1/chat/completions");
    assert.equal(err.http?.retryAfterRaw, "7");
    assert.equal(err.retryAfterMs, 7000);
    assert.equal(err.detail.case, "provider");
    assert.equal(err.detail.case === "provider" && err.detail.value.provider, "openai");
    assert.equal(err.attempts, 1);
    assert.equal(err.grpcCode, grpc.status.RESOURCE_EXHAUSTED);
    assert.equal(err.grpcCodeName, "RESOURCE_EXHAUSTED");
    assert.equal(err.reason, "QUOTA_EXHAUSTED");
    assert.ok(err instanceof QuotaExhaustedError);
    assert.ok(err instanceof UncorrectableError);
    assert.ok(!(err instanceof CorrectableError));
    assert.equal(err.name, "QuotaExhaustedError");
  });

  it("leaves http and retryAfterMs undefined when the failure has none", () => {
    const message = "No model gpt-9 in the catalog.";
    const failure = create(FailureSchema, {
      kind: FailureKind.MODEL_NOT_FOUND,
      message,
      explanation: `${message}\n${UNCORRECTABLE_LINE}`,
      detail: { case: "resource", value: { resourceType: "model", identifier: "gpt-9", available: ["fast"] } },
    });
    const err = fromServiceError(serviceError(failureStatus(failure)));
    assert.equal(err.http, undefined);
    assert.equal(err.retryAfterMs, undefined);
    assert.equal(err.grpcCode, grpc.status.NOT_FOUND);
    assert.deepEqual(err.detail.case === "resource" ? err.detail.value.available : [], ["fast"]);
  });

  it("takes the wait from RetryInfo when the failure has none", () => {
    const failure = create(FailureSchema, { kind: FailureKind.UPSTREAM_RETRIES_EXHAUSTED, message: "m", explanation: "m" });
    const status = failureStatus(failure);
    status.details.push(packBytes(RETRY_INFO_TYPE, encodeRetryInfo({ retryDelay: { $typeName: "google.protobuf.Duration", seconds: 1n, nanos: 500_000_000 } })));
    assert.equal(fromServiceError(serviceError(status)).retryAfterMs, 1500);
  });

  it("falls back to ErrorInfo and the status message without a Failure", () => {
    const err = fromServiceError(
      serviceError({
        code: grpc.status.ABORTED,
        message: "The reply was not a JSON object.",
        details: [packBytes(ERROR_INFO_TYPE, encodeErrorInfo({ reason: "JSON_PARSE", domain: ERROR_DOMAIN, metadata: {} }))],
      }),
    );
    assert.equal(err.kind, FailureKind.JSON_PARSE);
    assert.equal(err.correctable, true);
    assert.equal(err.message, "The reply was not a JSON object.");
    assert.equal(err.explanation, `The reply was not a JSON object.\n${CORRECTABLE_LINE}`);
    assert.equal(err.failure, undefined);
    assert.equal(err.reason, "JSON_PARSE");
    assert.ok(err instanceof JsonParseError && err instanceof CorrectableError);
  });

  it("ignores an ErrorInfo of another domain", () => {
    const err = fromServiceError(
      serviceError({
        code: grpc.status.PERMISSION_DENIED,
        message: "denied by mesh",
        details: [packBytes(ERROR_INFO_TYPE, encodeErrorInfo({ reason: "JSON_PARSE", domain: "mesh.example", metadata: {} }))],
      }),
    );
    assert.equal(err.kind, FailureKind.SYSTEM);
    assert.equal(err.correctable, false);
    assert.equal(err.reason, "JSON_PARSE");
  });

  it("keeps the code and message of a status that is not a sidecar failure", () => {
    const plain = Object.assign(new Error("14 UNAVAILABLE: connection refused"), {
      code: grpc.status.UNAVAILABLE,
      details: "connection refused",
      metadata: new grpc.Metadata(),
    });
    const err = fromServiceError(plain);
    assert.equal(err.kind, FailureKind.EXTERNAL_SERVICE);
    assert.equal(err.correctable, false);
    assert.equal(err.grpcCode, grpc.status.UNAVAILABLE);
    assert.equal(err.message, "connection refused");
    assert.equal(err.explanation, `connection refused\n${UNCORRECTABLE_LINE}`);
    assert.equal(err.cause, plain);
    assert.ok(err instanceof ExternalServiceError);
  });

  it("takes the kind of a status that is not a sidecar failure from its code", () => {
    const table: [grpc.status, FailureKind][] = [
      [grpc.status.DEADLINE_EXCEEDED, FailureKind.JOB_TIMEOUT],
      [grpc.status.CANCELLED, FailureKind.JOB_CANCELLED],
      [grpc.status.UNAVAILABLE, FailureKind.EXTERNAL_SERVICE],
      [grpc.status.INVALID_ARGUMENT, FailureKind.INVALID_INPUT],
      [grpc.status.RESOURCE_EXHAUSTED, FailureKind.INVALID_INPUT],
      [grpc.status.UNKNOWN, FailureKind.SYSTEM],
      [grpc.status.INTERNAL, FailureKind.SYSTEM],
    ];
    for (const [code, kind] of table) {
      const err = fromServiceError(Object.assign(new Error(""), { code, details: "", metadata: new grpc.Metadata() }));
      assert.equal(err.kind, kind, grpc.status[code]);
      assert.equal(err.correctable, isCorrectableKind(kind));
      assert.equal(err.message, grpc.status[code], "an empty message becomes the code name");
    }
  });

  it("returns a SidecarError as it is", () => {
    const err = fromServiceError(serviceError(failureStatus(quotaFailure())));
    assert.equal(fromServiceError(err), err);
  });

  it("survives a corrupt trailer", () => {
    const metadata = new grpc.Metadata();
    metadata.set("grpc-status-details-bin", Buffer.from([0xff, 0xff, 0xff]));
    const err = fromServiceError(Object.assign(new Error("x"), { code: grpc.status.INTERNAL, details: "boom", metadata }));
    assert.equal(err.grpcCode, grpc.status.INTERNAL);
    assert.equal(err.message, "boom");
  });
});

describe("google.rpc codec", () => {
  it("round-trips Status and ErrorInfo", () => {
    const info = { reason: "CIRCUIT_OPEN", domain: ERROR_DOMAIN, metadata: { service: "docs", cooldownSeconds: "30" } };
    const status = { code: 14, message: "open", details: [packBytes(ERROR_INFO_TYPE, encodeErrorInfo(info))] };
    const decoded = decodeStatus(encodeStatus(status));
    assert.equal(decoded.code, 14);
    assert.equal(decoded.message, "open");
    assert.equal(decoded.details[0]?.typeUrl, "type.googleapis.com/google.rpc.ErrorInfo");
    assert.deepEqual(decodeErrorInfo(decoded.details[0]!.value), info);
  });
});

describe("kinds", () => {
  it("round-trip through their names", () => {
    for (const value of Object.values(FailureKind).filter((v): v is FailureKind => typeof v === "number")) {
      assert.equal(kindFromName(kindName(value)), value);
      assert.equal(kindFromName(`FAILURE_KIND_${kindName(value)}`), value);
    }
    assert.equal(kindFromName("NOT_A_KIND"), undefined);
  });

  it("are correctable for exactly the five", () => {
    const correctable = Object.values(FailureKind)
      .filter((v): v is FailureKind => typeof v === "number" && isCorrectableKind(v))
      .map(kindName)
      .sort();
    assert.deepEqual(correctable, ["GUARDRAIL", "INVALID_INPUT", "JSON_PARSE", "RESOURCE_NOT_FOUND", "RESPONSE_VALIDATION"]);
  });
});

describe("one class per kind", () => {
  const kinds = Object.values(FailureKind).filter((v): v is FailureKind => typeof v === "number");

  it("is the class of every kind's errors, under the branch the kind's correctability names", () => {
    for (const kind of kinds.filter((k) => k !== FailureKind.UNSPECIFIED)) {
      const err = fromStatus(grpc.status.UNKNOWN, "m", {
        code: grpc.status.UNKNOWN,
        message: "m",
        details: [packBytes(ERROR_INFO_TYPE, encodeErrorInfo({ reason: kindName(kind), domain: ERROR_DOMAIN, metadata: {} }))],
      });
      const cls = errorClass(kind);
      assert.ok(err instanceof cls, kindName(kind));
      assert.ok(err instanceof SidecarError && err instanceof Error);
      assert.equal(err.kind, kind);
      assert.equal(err.name, cls.name);
      assert.equal(err instanceof CorrectableError, isCorrectableKind(kind), kindName(kind));
      assert.equal(err instanceof UncorrectableError, !isCorrectableKind(kind), kindName(kind));
    }
    assert.equal(new Set(kinds.filter((k) => k !== FailureKind.UNSPECIFIED).map(errorClass)).size, kinds.length - 1);
  });

  it("makes STREAM_INTERRUPTED a StreamInterruptedError, and a kind it does not know a SystemFailureError", () => {
    assert.equal(errorClass(FailureKind.STREAM_INTERRUPTED), StreamInterruptedError);
    assert.equal(errorClass(FailureKind.UNSPECIFIED), SystemFailureError);
    assert.equal(errorClass(99 as FailureKind), SystemFailureError);
    const unknown = SidecarError.fromFailure(create(FailureSchema, { kind: 99 as FailureKind, message: "m" }));
    assert.ok(unknown instanceof SystemFailureError);
    assert.equal(unknown.kind, 99);
  });
});

/**
 * What the contract says of each kind, as data: written by tools/protogen.py from sidecar.proto
 * (its --check fails when stale); every client's tests compare their answers with it.
 */
const FAILURE_KINDS_FILE = new URL("../../../../tests/conformance/failure_kinds.json", import.meta.url);

describe("the contract", () => {
  it("says of every kind what this client says", () => {
    const contract = JSON.parse(readFileSync(FAILURE_KINDS_FILE, "utf8")) as {
      correctable_line: string;
      uncorrectable_line: string;
      kinds: { number: number; name: string; correctable: boolean }[];
    };
    assert.equal(CORRECTABLE_LINE, contract.correctable_line);
    assert.equal(UNCORRECTABLE_LINE, contract.uncorrectable_line);
    const known = Object.values(FailureKind).filter((v): v is FailureKind => typeof v === "number");
    assert.deepEqual(contract.kinds.map((k) => k.number), known);
    for (const want of contract.kinds) {
      const kind = want.number as FailureKind;
      assert.equal(kindName(kind), want.name);
      assert.equal(isCorrectableKind(kind), want.correctable, want.name);
      const line = want.correctable ? contract.correctable_line : contract.uncorrectable_line;
      assert.equal(explain("m", isCorrectableKind(kind)), `m\n${line}`);
    }
  });
});
