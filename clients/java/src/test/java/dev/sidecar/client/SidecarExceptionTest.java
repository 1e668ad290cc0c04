package dev.sidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Any;
import com.google.rpc.BadRequest;
import com.google.rpc.ErrorInfo;
import com.google.rpc.RetryInfo;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusException;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.StatusProto;
import java.time.Duration;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import dev.sidecar.v1.Failure;
import dev.sidecar.v1.FailureKind;
import dev.sidecar.v1.ResourceDetail;
import dev.sidecar.v1.RetryDetail;

class SidecarExceptionTest {

  @Test
  void aPackedCorrectableFailureIsRebuiltFieldByField() {
    Failure failure = RichStatuses.resourceNotFound();
    StatusRuntimeException wire =
        StatusProto.toStatusRuntimeException(RichStatuses.carrying(Status.Code.NOT_FOUND, failure));

    SidecarException error = SidecarException.fromThrowable(wire);

    CorrectableSidecarException correctable = assertInstanceOf(CorrectableSidecarException.class, error);
    assertEquals(FailureKind.FAILURE_KIND_RESOURCE_NOT_FOUND, correctable.kind());
    assertEquals("RESOURCE_NOT_FOUND", correctable.kindName());
    assertTrue(correctable.correctable());
    assertEquals("No document with id 'doc-42' exists.", correctable.getMessage());
    assertEquals(
        "No document with id 'doc-42' exists.\n" + FailureKinds.CORRECTABLE_LINE, correctable.explanation());
    HttpInfo http = correctable.http().orElseThrow();
    assertEquals(404, http.statusCode());
    assertEquals("docs", http.service());
    assertEquals("https://docs.example/v1/documents/doc-42", http.endpoint());
    assertEquals("{\"error\":\"not found\"}", http.body());
    assertEquals(Optional.empty(), http.retryAfterRaw());
    assertEquals(Optional.empty(), correctable.retryAfter());
    assertEquals(1, correctable.attempts());
    assertEquals(Failure.DetailCase.RESOURCE, correctable.detailCase());
    assertEquals("doc-42", correctable.detail(ResourceDetail.class).orElseThrow().getIdentifier());
    assertEquals(Status.Code.NOT_FOUND, correctable.grpcCode());
    assertEquals(failure, correctable.failure());
    assertTrue(correctable.fromSidecar());
    assertSame(wire, correctable.getCause());
  }

  @Test
  void aPackedUncorrectableFailureKeepsItsWaitAndRetryDetail() {
    Failure failure = RichStatuses.retriesExhausted();
    StatusRuntimeException wire =
        StatusProto.toStatusRuntimeException(RichStatuses.carrying(Status.Code.UNAVAILABLE, failure));

    SidecarException error = SidecarException.fromThrowable(wire);

    assertInstanceOf(UncorrectableSidecarException.class, error);
    assertEquals("UPSTREAM_RETRIES_EXHAUSTED", error.kindName());
    assertFalse(error.correctable());
    assertEquals(failure.getMessage() + "\n" + FailureKinds.UNCORRECTABLE_LINE, error.explanation());
    assertEquals(Duration.ofMillis(7_500), error.retryAfter().orElseThrow());
    assertEquals(Optional.of("7"), error.http().orElseThrow().retryAfterRaw());
    assertEquals(429, error.http().orElseThrow().statusCode());
    assertEquals(4, error.attempts());
    assertEquals(3, error.detail(RetryDetail.class).orElseThrow().getBudget());
    assertEquals(Status.Code.UNAVAILABLE, error.grpcCode());
    assertEquals("UPSTREAM_RETRIES_EXHAUSTED", error.errorInfo().orElseThrow().getReason());
    assertEquals(7, error.retryInfo().orElseThrow().getRetryDelay().getSeconds());
  }

  @Test
  void theStandardDetailsBesideTheFailureAreReachable() {
    Failure failure = RichStatuses.invalidInput();
    StatusException wire =
        StatusProto.toStatusException(RichStatuses.carrying(Status.Code.INVALID_ARGUMENT, failure));

    SidecarException error = SidecarException.fromThrowable(wire);

    assertInstanceOf(CorrectableSidecarException.class, error);
    BadRequest badRequest = error.badRequest().orElseThrow();
    assertEquals("limit", badRequest.getFieldViolations(0).getField());
    assertEquals(Optional.empty(), error.quotaFailure());
    assertEquals(Optional.empty(), error.resourceInfo());
    assertEquals("0", error.errorMetadata().get("attempts"));
  }

  @Test
  void withoutAFailureTheKindComesFromErrorInfoAndTheWaitFromRetryInfo() {
    com.google.rpc.Status rich =
        com.google.rpc.Status.newBuilder()
            .setCode(Status.Code.RESOURCE_EXHAUSTED.value())
            .setMessage("The account is out of credit.")
            .addDetails(
                Any.pack(
                    ErrorInfo.newBuilder()
                        .setReason("QUOTA_EXHAUSTED")
                        .setDomain("sidecar")
                        .putMetadata("attempts", "2")
                        .build()))
            .addDetails(
                Any.pack(
                    RetryInfo.newBuilder()
                        .setRetryDelay(com.google.protobuf.Duration.newBuilder().setSeconds(30))
                        .build()))
            .build();

    SidecarException error = SidecarException.fromThrowable(StatusProto.toStatusRuntimeException(rich));

    assertInstanceOf(UncorrectableSidecarException.class, error);
    assertEquals(FailureKind.FAILURE_KIND_QUOTA_EXHAUSTED, error.kind());
    assertEquals("The account is out of credit.", error.getMessage());
    assertEquals("The account is out of credit.\n" + FailureKinds.UNCORRECTABLE_LINE, error.explanation());
    assertEquals(Duration.ofSeconds(30), error.retryAfter().orElseThrow());
    assertEquals(2, error.attempts());
    assertEquals(Optional.empty(), error.http());
    assertEquals(Optional.empty(), error.detail());
    assertTrue(error.fromSidecar());
  }

  @Test
  void withoutAFailureTheHttpDetailComesFromTheErrorInfoMetadata() {
    com.google.rpc.Status rich =
        com.google.rpc.Status.newBuilder()
            .setCode(Status.Code.UNAVAILABLE.value())
            .setMessage("The search service answered 503.")
            .addDetails(
                Any.pack(
                    ErrorInfo.newBuilder()
                        .setReason("EXTERNAL_SERVICE")
                        .setDomain("sidecar")
                        .putMetadata("kind", "EXTERNAL_SERVICE")
                        .putMetadata("correctable", "false")
                        .putMetadata("attempts", "3")
                        .putMetadata("httpStatus", "503")
                        .putMetadata("service", "search")
                        .putMetadata("endpoint", "https://search.example/v1/query")
                        .putMetadata("retryAfterRaw", "12")
                        .putMetadata("retryAfterSeconds", "12.5")
                        .build()))
            .build();

    SidecarException error = SidecarException.fromThrowable(StatusProto.toStatusRuntimeException(rich));

    HttpInfo http = error.http().orElseThrow();
    assertEquals(503, http.statusCode());
    assertEquals("search", http.service());
    assertEquals("https://search.example/v1/query", http.endpoint());
    assertEquals("", http.body());
    assertEquals(Optional.of("12"), http.retryAfterRaw());
    assertEquals(Duration.ofMillis(12_500), error.retryAfter().orElseThrow());
    assertEquals(3, error.attempts());
    assertFalse(error.correctable());
  }

  @Test
  void aCorrectableReasonWithoutAFailureIsCorrectable() {
    com.google.rpc.Status rich =
        com.google.rpc.Status.newBuilder()
            .setCode(Status.Code.INVALID_ARGUMENT.value())
            .setMessage("The reply was not JSON.")
            .addDetails(Any.pack(ErrorInfo.newBuilder().setReason("JSON_PARSE").setDomain("sidecar").build()))
            .build();

    SidecarException error = SidecarException.fromThrowable(StatusProto.toStatusRuntimeException(rich));

    assertInstanceOf(CorrectableSidecarException.class, error);
    assertEquals("JSON_PARSE", error.kindName());
    assertTrue(error.explanation().endsWith(FailureKinds.CORRECTABLE_LINE));
  }

  @Test
  void aPlainStatusFallsBackToTheCode() {
    StatusRuntimeException unreachable =
        Status.UNAVAILABLE.withDescription("io exception: connection refused").asRuntimeException();

    SidecarException error = SidecarException.fromThrowable(unreachable);

    assertInstanceOf(UncorrectableSidecarException.class, error);
    assertEquals(FailureKind.FAILURE_KIND_EXTERNAL_SERVICE, error.kind());
    assertEquals("io exception: connection refused", error.getMessage());
    assertEquals(Status.Code.UNAVAILABLE, error.grpcCode());
    assertEquals(Optional.empty(), error.rpcStatus());
    assertFalse(error.fromSidecar());
  }

  @Test
  void aPassedDeadlineIsAJobTimeoutAndACancelIsAJobCancelled() {
    assertEquals(
        FailureKind.FAILURE_KIND_JOB_TIMEOUT,
        SidecarException.fromThrowable(Status.DEADLINE_EXCEEDED.asRuntimeException()).kind());
    assertEquals(
        FailureKind.FAILURE_KIND_JOB_CANCELLED,
        SidecarException.fromThrowable(Status.CANCELLED.asRuntimeException()).kind());
    SidecarException bare = SidecarException.fromThrowable(Status.INTERNAL.asRuntimeException());
    assertEquals(FailureKind.FAILURE_KIND_SYSTEM, bare.kind());
    assertEquals("The sidecar call failed with gRPC status INTERNAL.", bare.getMessage());
  }

  @Test
  void aTrailerWhoseCodeDiffersFromTheCallsIsStillRead() {
    Failure failure = RichStatuses.resourceNotFound();
    Metadata trailers = new Metadata();
    trailers.put(
        SidecarException.STATUS_DETAILS_KEY,
        RichStatuses.carrying(Status.Code.NOT_FOUND, failure));
    StatusRuntimeException wire = Status.INTERNAL.withDescription("other").asRuntimeException(trailers);

    SidecarException error = SidecarException.fromThrowable(wire);

    assertEquals(failure, error.failure());
    assertEquals(Status.Code.INTERNAL, error.grpcCode());
  }

  @Test
  void anyOtherThrowableIsASystemFailure() {
    SidecarException error = SidecarException.fromThrowable(new IllegalStateException("boom"));

    assertInstanceOf(UncorrectableSidecarException.class, error);
    assertEquals(FailureKind.FAILURE_KIND_SYSTEM, error.kind());
    assertEquals(Status.Code.UNKNOWN, error.grpcCode());
  }

  @Test
  void aFailureAnsweredAsAResultBecomesAnExceptionWithCodeOk() {
    SidecarException error = SidecarException.fromFailure(RichStatuses.invalidInput());

    assertInstanceOf(CorrectableSidecarException.class, error);
    assertEquals(Status.Code.OK, error.grpcCode());
    assertEquals("limit", error.failure().getInvalidInput().getParameter());
  }

  @Test
  void aRichStatusAloneIsEnough() {
    Failure failure = RichStatuses.retriesExhausted();
    SidecarException error =
        SidecarException.fromRpcStatus(RichStatuses.carrying(Status.Code.UNAVAILABLE, failure));

    assertEquals(failure, error.failure());
    assertEquals(Status.Code.UNAVAILABLE, error.grpcCode());
  }

  @ParameterizedTest
  @EnumSource(
      value = FailureKind.class,
      names = {"FAILURE_KIND_UNSPECIFIED", "UNRECOGNIZED"},
      mode = EnumSource.Mode.EXCLUDE)
  void everyKindRebuiltFromErrorInfoLandsInItsBranch(FailureKind kind) {
    String reason = FailureKinds.name(kind);
    com.google.rpc.Status rich =
        com.google.rpc.Status.newBuilder()
            .setCode(Status.Code.FAILED_PRECONDITION.value())
            .setMessage("m")
            .addDetails(Any.pack(ErrorInfo.newBuilder().setReason(reason).setDomain("sidecar").build()))
            .build();

    SidecarException error = SidecarException.fromThrowable(StatusProto.toStatusRuntimeException(rich));

    assertEquals(kind, error.kind());
    boolean correctable =
        kind == FailureKind.FAILURE_KIND_INVALID_INPUT
            || kind == FailureKind.FAILURE_KIND_RESOURCE_NOT_FOUND
            || kind == FailureKind.FAILURE_KIND_GUARDRAIL
            || kind == FailureKind.FAILURE_KIND_JSON_PARSE
            || kind == FailureKind.FAILURE_KIND_RESPONSE_VALIDATION;
    assertEquals(correctable, error.correctable());
    assertEquals(correctable, error instanceof CorrectableSidecarException);
    assertEquals(!correctable, error instanceof UncorrectableSidecarException);
    assertEquals(kind == FailureKind.FAILURE_KIND_STREAM_INTERRUPTED, error instanceof StreamInterruptedException);
  }

  @Test
  void kindNamesParseWithOrWithoutThePrefix() {
    assertEquals(Optional.of(FailureKind.FAILURE_KIND_GUARDRAIL), FailureKinds.parse("GUARDRAIL"));
    assertEquals(Optional.of(FailureKind.FAILURE_KIND_GUARDRAIL), FailureKinds.parse("FAILURE_KIND_GUARDRAIL"));
    assertEquals(Optional.empty(), FailureKinds.parse("NOT_A_KIND"));
    assertEquals("CIRCUIT_OPEN", FailureKinds.name(FailureKind.FAILURE_KIND_CIRCUIT_OPEN));
  }
}
