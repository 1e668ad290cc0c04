package dev.sidecar.client;

import com.google.protobuf.Any;
import com.google.protobuf.Descriptors;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.rpc.BadRequest;
import com.google.rpc.ErrorInfo;
import com.google.rpc.QuotaFailure;
import com.google.rpc.ResourceInfo;
import com.google.rpc.RetryInfo;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.protobuf.ProtoUtils;
import io.grpc.protobuf.StatusProto;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import dev.sidecar.v1.Failure;
import dev.sidecar.v1.FailureKind;
import dev.sidecar.v1.Hop;
import dev.sidecar.v1.HttpDetail;

/**
 * A failure the sidecar reported, or a failure to reach it, as one exception.
 *
 * <pre>
 * SidecarException                      (abstract) kind, correctable, message, explanation, http,
 * │                                     retryAfter, attempts, detail, grpc status code
 * ├── CorrectableSidecarException       the call was wrong: fix it and call again
 * │                                     INVALID_INPUT, RESOURCE_NOT_FOUND, GUARDRAIL,
 * │                                     JSON_PARSE, RESPONSE_VALIDATION
 * └── UncorrectableSidecarException     only another approach can help: every other kind
 *     └── StreamInterruptedException    STREAM_INTERRUPTED: streamDetail(), partialText()
 * </pre>
 *
 * <p>{@link #fromThrowable} is the one boundary where a gRPC failure becomes one of these. It
 * reads the {@code google.rpc.Status} of the {@code grpc-status-details-bin} trailer and, when an
 * {@code Any} there packs a {@code sidecar.v1.Failure}, takes every field from it. Without one
 * (a status from the gRPC library itself, e.g. the sidecar unreachable or the deadline passed) the
 * kind comes from the {@code ErrorInfo} reason of domain {@code sidecar} when there is one, else
 * from the status code (see {@link #kindForCode}); the wait from {@code RetryInfo} (or the
 * metadata's {@code retryAfterSeconds}); {@code correctable}, {@code attempts} and the HTTP
 * status, service, endpoint and raw Retry-After from the ErrorInfo metadata the sidecar writes
 * ({@code correctable}, {@code attempts}, {@code httpStatus}, {@code service}, {@code endpoint},
 * {@code retryAfterRaw}; the body is not there); and the explanation is written the sidecar's way:
 * the message, a newline, the retry line.
 *
 * <p>{@link #getMessage()} is the failure's plain message; {@link #explanation()} is what the
 * model should read.
 */
public abstract class SidecarException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** The trailer of the rich status: a binary {@code google.rpc.Status}. */
  public static final Metadata.Key<com.google.rpc.Status> STATUS_DETAILS_KEY =
      Metadata.Key.of(
          "grpc-status-details-bin", ProtoUtils.metadataMarshaller(com.google.rpc.Status.getDefaultInstance()));

  private final transient Failure failure;
  private final Status.Code grpcCode;
  private final transient com.google.rpc.Status rpcStatus;
  private final boolean fromSidecar;

  SidecarException(
      Failure failure, Status.Code grpcCode, com.google.rpc.Status rpcStatus, boolean fromSidecar, Throwable cause) {
    super(failure.getMessage(), cause);
    this.failure = failure;
    this.grpcCode = Objects.requireNonNull(grpcCode, "grpcCode");
    this.rpcStatus = rpcStatus;
    this.fromSidecar = fromSidecar;
  }

  // ---------------------------------------------------------------- building

  /**
   * Rebuilds the failure a failed call carried ({@code StatusRuntimeException} or {@code
   * StatusException}); any other throwable becomes a {@code SYSTEM} failure with code UNKNOWN.
   */
  public static SidecarException fromThrowable(Throwable error) {
    Objects.requireNonNull(error, "error");
    if (error instanceof SidecarException) {
      return (SidecarException) error;
    }
    Status status = Status.fromThrowable(error);
    Metadata trailers = Status.trailersFromThrowable(error);
    return fromStatus(status, trailers, error);
  }

  /** Rebuilds the failure carried by a status and its trailers (either may lack details). */
  public static SidecarException fromStatus(Status status, Metadata trailers) {
    return fromStatus(status, trailers, status.getCause());
  }

  /** Rebuilds the failure carried by a {@code google.rpc.Status} (its code is the gRPC code). */
  public static SidecarException fromRpcStatus(com.google.rpc.Status rpcStatus) {
    Status status = Status.fromCodeValue(rpcStatus.getCode()).withDescription(rpcStatus.getMessage());
    return build(status, rpcStatus, null);
  }

  /**
   * The exception for a failure the sidecar answered without failing the RPC (an ExecuteTool
   * outcome, a ClassifyFailure answer): the gRPC code is OK.
   */
  public static SidecarException fromFailure(Failure failure) {
    return create(failure, Status.Code.OK, null, true, null);
  }

  private static SidecarException fromStatus(Status status, Metadata trailers, Throwable cause) {
    Objects.requireNonNull(status, "status");
    return build(status, richStatus(status, trailers), cause);
  }

  private static com.google.rpc.Status richStatus(Status status, Metadata trailers) {
    if (trailers == null) {
      return null;
    }
    try {
      return StatusProto.fromStatusAndTrailers(status, trailers);
    } catch (IllegalArgumentException codeMismatch) {
      // The trailer's code differs from the call's own; the details still say what failed.
      try {
        return trailers.get(STATUS_DETAILS_KEY);
      } catch (RuntimeException unreadable) {
        return null;
      }
    } catch (RuntimeException unreadable) {
      return null;
    }
  }

  private static SidecarException build(Status status, com.google.rpc.Status rpc, Throwable cause) {
    Failure packed = rpc == null ? null : unpack(rpc.getDetailsList(), Failure.class);
    if (packed != null) {
      return create(packed, status.getCode(), rpc, true, cause);
    }
    ErrorInfo info = rpc == null ? null : unpack(rpc.getDetailsList(), ErrorInfo.class);
    RetryInfo retry = rpc == null ? null : unpack(rpc.getDetailsList(), RetryInfo.class);

    FailureKind kind = null;
    if (info != null && (info.getDomain().isEmpty() || FailureKinds.DOMAIN.equals(info.getDomain()))) {
      kind = FailureKinds.parse(info.getReason()).orElse(null);
    }
    if (kind == null) {
      kind = kindForCode(status.getCode());
    }
    Map<String, String> metadata = info == null ? Map.of() : info.getMetadataMap();
    boolean correctable =
        metadata.containsKey("correctable")
            ? Boolean.parseBoolean(metadata.get("correctable"))
            : FailureKinds.isCorrectable(kind);
    String message = rpc != null && !rpc.getMessage().isEmpty() ? rpc.getMessage() : status.getDescription();
    if (message == null || message.isBlank()) {
      message = "The sidecar call failed with gRPC status " + status.getCode() + ".";
    }
    Failure.Builder failure =
        Failure.newBuilder()
            .setKind(kind)
            .setCorrectable(correctable)
            .setMessage(message)
            .setExplanation(FailureKinds.explanation(message, correctable));
    if (retry != null && retry.hasRetryDelay()) {
      failure.setRetryAfter(retry.getRetryDelay());
    } else if (metadata.containsKey("retryAfterSeconds")) {
      seconds(metadata.get("retryAfterSeconds")).ifPresent(failure::setRetryAfter);
    }
    Integer attempts = integer(metadata.get("attempts"));
    if (attempts != null) {
      failure.setAttempts(attempts);
    }
    Integer httpStatus = integer(metadata.get("httpStatus"));
    if (httpStatus != null) {
      HttpDetail.Builder http =
          HttpDetail.newBuilder()
              .setStatusCode(httpStatus)
              .setService(metadata.getOrDefault("service", ""))
              .setEndpoint(metadata.getOrDefault("endpoint", ""));
      if (metadata.containsKey("retryAfterRaw")) {
        http.setRetryAfterRaw(metadata.get("retryAfterRaw"));
      }
      failure.setHttp(http);
    }
    boolean fromSidecar = info != null && FailureKinds.DOMAIN.equals(info.getDomain());
    return create(failure.build(), status.getCode(), rpc, fromSidecar, cause);
  }

  private static SidecarException create(
      Failure failure, Status.Code code, com.google.rpc.Status rpc, boolean fromSidecar, Throwable cause) {
    if (failure.getCorrectable()) {
      return new CorrectableSidecarException(failure, code, rpc, fromSidecar, cause);
    }
    if (failure.getKind() == FailureKind.FAILURE_KIND_STREAM_INTERRUPTED) {
      return new StreamInterruptedException(failure, code, rpc, fromSidecar, cause);
    }
    return new UncorrectableSidecarException(failure, code, rpc, fromSidecar, cause);
  }

  /**
   * The kind of a failure that carries no {@code sidecar.v1.Failure} and no ErrorInfo reason:
   * CANCELLED is JOB_CANCELLED, DEADLINE_EXCEEDED is JOB_TIMEOUT, INVALID_ARGUMENT is
   * INVALID_INPUT, NOT_FOUND is RESOURCE_NOT_FOUND, PERMISSION_DENIED is PERMISSION_DENIED,
   * UNAUTHENTICATED is UNAUTHORIZED, RESOURCE_EXHAUSTED is UPSTREAM_THROTTLE, UNAVAILABLE (the
   * sidecar could not be reached) is EXTERNAL_SERVICE, OK is UNSPECIFIED, and every other code is
   * SYSTEM.
   */
  public static FailureKind kindForCode(Status.Code code) {
    switch (code) {
      case OK:
        return FailureKind.FAILURE_KIND_UNSPECIFIED;
      case CANCELLED:
        return FailureKind.FAILURE_KIND_JOB_CANCELLED;
      case DEADLINE_EXCEEDED:
        return FailureKind.FAILURE_KIND_JOB_TIMEOUT;
      case INVALID_ARGUMENT:
        return FailureKind.FAILURE_KIND_INVALID_INPUT;
      case NOT_FOUND:
        return FailureKind.FAILURE_KIND_RESOURCE_NOT_FOUND;
      case PERMISSION_DENIED:
        return FailureKind.FAILURE_KIND_PERMISSION_DENIED;
      case UNAUTHENTICATED:
        return FailureKind.FAILURE_KIND_UNAUTHORIZED;
      case RESOURCE_EXHAUSTED:
        return FailureKind.FAILURE_KIND_UPSTREAM_THROTTLE;
      case UNAVAILABLE:
        return FailureKind.FAILURE_KIND_EXTERNAL_SERVICE;
      default:
        return FailureKind.FAILURE_KIND_SYSTEM;
    }
  }

  private static Integer integer(String text) {
    return text != null && text.matches("\\d{1,9}") ? Integer.valueOf(text) : null;
  }

  private static Optional<com.google.protobuf.Duration> seconds(String text) {
    try {
      double value = Double.parseDouble(text);
      if (!(value >= 0) || value > 1e9) {
        return Optional.empty();
      }
      long whole = (long) value;
      int nanos = (int) Math.round((value - whole) * 1e9);
      if (nanos >= 1_000_000_000) {
        whole += 1;
        nanos -= 1_000_000_000;
      }
      return Optional.of(com.google.protobuf.Duration.newBuilder().setSeconds(whole).setNanos(nanos).build());
    } catch (NumberFormatException notANumber) {
      return Optional.empty();
    }
  }

  private static <T extends Message> T unpack(List<Any> details, Class<T> type) {
    for (Any any : details) {
      if (any.is(type)) {
        try {
          return any.unpack(type);
        } catch (InvalidProtocolBufferException corrupt) {
          return null;
        }
      }
    }
    return null;
  }

  // ---------------------------------------------------------------- the failure

  /** What went wrong. */
  public FailureKind kind() {
    return failure.getKind();
  }

  /** The kind's name without the {@code FAILURE_KIND_} prefix, e.g. {@code RESOURCE_NOT_FOUND}. */
  public String kindName() {
    return FailureKinds.name(failure.getKind());
  }

  /** Whether a corrected call can help (true) or only another approach (false). */
  public boolean correctable() {
    return failure.getCorrectable();
  }

  /** The failure's message, a newline, and the retry line: what the model should read. */
  public String explanation() {
    return failure.getExplanation();
  }

  /** What the upstream answered, when it answered. */
  public Optional<HttpInfo> http() {
    return failure.hasHttp() ? Optional.of(HttpInfo.fromProto(failure.getHttp())) : Optional.empty();
  }

  /** How long to wait before the same call could succeed, when known. */
  public Optional<Duration> retryAfter() {
    if (!failure.hasRetryAfter()) {
      return Optional.empty();
    }
    com.google.protobuf.Duration wait = failure.getRetryAfter();
    return Optional.of(Duration.ofSeconds(wait.getSeconds(), wait.getNanos()));
  }

  /** Upstream attempts made before this failure. */
  public int attempts() {
    return failure.getAttempts();
  }

  /**
   * When the model id is a route: every deployment tried, in order (the last one ended with this
   * failure); empty otherwise.
   */
  public List<Hop> hops() {
    return failure.getHopsList();
  }

  /** Which structured detail the failure carries. */
  public Failure.DetailCase detailCase() {
    return failure.getDetailCase();
  }

  /** The structured detail of the kind (e.g. a {@code ResourceDetail}), when there is one. */
  public Optional<Message> detail() {
    Descriptors.OneofDescriptor oneof = Failure.getDescriptor().getOneofs().get(0);
    Descriptors.FieldDescriptor field = failure.getOneofFieldDescriptor(oneof);
    return field == null ? Optional.empty() : Optional.of((Message) failure.getField(field));
  }

  /** The structured detail when it is of {@code type}. */
  public <T extends Message> Optional<T> detail(Class<T> type) {
    return detail().filter(type::isInstance).map(type::cast);
  }

  /** The whole failure, as the sidecar sent it (or as rebuilt from the status). */
  public Failure failure() {
    return failure;
  }

  /** True when the failure came from the sidecar (a packed Failure or a sidecar ErrorInfo). */
  public boolean fromSidecar() {
    return fromSidecar;
  }

  // ---------------------------------------------------------------- the gRPC carrier

  /** The gRPC status code of the call; OK for a failure answered as a result. */
  public Status.Code grpcCode() {
    return grpcCode;
  }

  /** The {@code google.rpc.Status} of the trailer, when there was one. */
  public Optional<com.google.rpc.Status> rpcStatus() {
    return Optional.ofNullable(rpcStatus);
  }

  /** The first detail of the rich status that is a {@code type}. */
  public <T extends Message> Optional<T> statusDetail(Class<T> type) {
    return rpcStatus == null ? Optional.empty() : Optional.ofNullable(unpack(rpcStatus.getDetailsList(), type));
  }

  /** The {@code google.rpc.ErrorInfo} of the rich status. */
  public Optional<ErrorInfo> errorInfo() {
    return statusDetail(ErrorInfo.class);
  }

  /** The {@code google.rpc.RetryInfo} of the rich status. */
  public Optional<RetryInfo> retryInfo() {
    return statusDetail(RetryInfo.class);
  }

  /** The {@code google.rpc.BadRequest} of the rich status. */
  public Optional<BadRequest> badRequest() {
    return statusDetail(BadRequest.class);
  }

  /** The {@code google.rpc.QuotaFailure} of the rich status. */
  public Optional<QuotaFailure> quotaFailure() {
    return statusDetail(QuotaFailure.class);
  }

  /** The {@code google.rpc.ResourceInfo} of the rich status. */
  public Optional<ResourceInfo> resourceInfo() {
    return statusDetail(ResourceInfo.class);
  }

  /** The ErrorInfo metadata (lowerCamel keys), empty without an ErrorInfo. */
  public Map<String, String> errorMetadata() {
    return errorInfo().map(ErrorInfo::getMetadataMap).orElse(Map.of());
  }

  @Override
  public String toString() {
    return getClass().getSimpleName() + "[" + kindName() + ", grpc=" + grpcCode + "]: " + getMessage();
  }
}
