package dev.sidecar.client;

import com.google.protobuf.Any;
import com.google.protobuf.Duration;
import com.google.rpc.BadRequest;
import com.google.rpc.ErrorInfo;
import com.google.rpc.RetryInfo;
import io.grpc.Status;
import dev.sidecar.v1.Failure;
import dev.sidecar.v1.FailureKind;
import dev.sidecar.v1.Hop;
import dev.sidecar.v1.HttpDetail;
import dev.sidecar.v1.InvalidInputDetail;
import dev.sidecar.v1.ResourceDetail;
import dev.sidecar.v1.RetryDetail;
import dev.sidecar.v1.RetrySignal;
import dev.sidecar.v1.StreamDetail;

/** Failures and rich statuses built the way the sidecar's contract says it sends them. */
public final class RichStatuses {
  private RichStatuses() {}

  public static Failure resourceNotFound() {
    String message = "No document with id 'doc-42' exists.";
    return Failure.newBuilder()
        .setKind(FailureKind.FAILURE_KIND_RESOURCE_NOT_FOUND)
        .setCorrectable(true)
        .setMessage(message)
        .setExplanation(FailureKinds.explanation(message, true))
        .setHttp(
            HttpDetail.newBuilder()
                .setStatusCode(404)
                .setService("docs")
                .setEndpoint("https://docs.example/v1/documents/doc-42")
                .setBody("{\"error\":\"not found\"}"))
        .setAttempts(1)
        .setResource(ResourceDetail.newBuilder().setResourceType("document").setIdentifier("doc-42"))
        .build();
  }

  public static Failure retriesExhausted() {
    String message = "The model gpt-x kept answering 429 (rate limit) after 3 retries.";
    return Failure.newBuilder()
        .setKind(FailureKind.FAILURE_KIND_UPSTREAM_RETRIES_EXHAUSTED)
        .setCorrectable(false)
        .setMessage(message)
        .setExplanation(FailureKinds.explanation(message, false))
        .setHttp(
            HttpDetail.newBuilder()
                .setStatusCode(429)
                .setService("openai")
                .setEndpoint("https://api.openai.example/v1/chat/completions")
                .setBody("{\"error\":{\"code\":\"rate_limit_exceeded\"}}")
                .setRetryAfterRaw("7"))
        .setRetryAfter(Duration.newBuilder().setSeconds(7).setNanos(500_000_000))
        .setAttempts(4)
        .setRetry(
            RetryDetail.newBuilder()
                .setBudget(3)
                .setLastSignal(RetrySignal.RETRY_SIGNAL_RATE_LIMIT)
                .setTarget("gpt-x"))
        .build();
  }

  public static Failure invalidInput() {
    String message = "Parameter 'limit' must be between 1 and 100; got 500.";
    return Failure.newBuilder()
        .setKind(FailureKind.FAILURE_KIND_INVALID_INPUT)
        .setCorrectable(true)
        .setMessage(message)
        .setExplanation(FailureKinds.explanation(message, true))
        .setInvalidInput(
            InvalidInputDetail.newBuilder().setParameter("limit").setValue("500").setRule("between 1 and 100"))
        .build();
  }

  public static Failure streamInterrupted() {
    String message = "The stream of fast was cut after 2 deltas: connection dropped.";
    return Failure.newBuilder()
        .setKind(FailureKind.FAILURE_KIND_STREAM_INTERRUPTED)
        .setCorrectable(false)
        .setMessage(message)
        .setExplanation(FailureKinds.explanation(message, false))
        .setAttempts(1)
        .setStream(
            StreamDetail.newBuilder().setPartialText("Hello, wo").setReason("connection dropped").setDeltasSent(2))
        .addHops(
            Hop.newBuilder()
                .setDeployment("fast-a")
                .setKind(FailureKind.FAILURE_KIND_CIRCUIT_OPEN)
                .setReason("circuit open")
                .setSkipped(true))
        .addHops(
            Hop.newBuilder()
                .setDeployment("fast-b")
                .setKind(FailureKind.FAILURE_KIND_STREAM_INTERRUPTED)
                .setAttempts(1)
                .setReason("cut"))
        .build();
  }

  public static ErrorInfo errorInfo(Failure failure) {
    return ErrorInfo.newBuilder()
        .setReason(FailureKinds.name(failure.getKind()))
        .setDomain(FailureKinds.DOMAIN)
        .putMetadata("attempts", Integer.toString(failure.getAttempts()))
        .build();
  }

  /** The google.rpc.Status the sidecar puts in the grpc-status-details-bin trailer. */
  public static com.google.rpc.Status carrying(Status.Code code, Failure failure) {
    com.google.rpc.Status.Builder status =
        com.google.rpc.Status.newBuilder()
            .setCode(code.value())
            .setMessage(failure.getMessage())
            .addDetails(Any.pack(failure))
            .addDetails(Any.pack(errorInfo(failure)));
    if (failure.hasRetryAfter()) {
      status.addDetails(Any.pack(RetryInfo.newBuilder().setRetryDelay(failure.getRetryAfter()).build()));
    }
    if (failure.hasInvalidInput()) {
      InvalidInputDetail detail = failure.getInvalidInput();
      status.addDetails(
          Any.pack(
              BadRequest.newBuilder()
                  .addFieldViolations(
                      BadRequest.FieldViolation.newBuilder()
                          .setField(detail.getParameter())
                          .setDescription(detail.getRule()))
                  .build()));
    }
    return status.build();
  }
}
