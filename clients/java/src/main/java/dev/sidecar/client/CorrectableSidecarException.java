package dev.sidecar.client;

import io.grpc.Status;
import dev.sidecar.v1.Failure;

/**
 * The call was wrong (INVALID_INPUT, RESOURCE_NOT_FOUND, GUARDRAIL, JSON_PARSE,
 * RESPONSE_VALIDATION): a corrected call may succeed.
 */
public final class CorrectableSidecarException extends SidecarException {
  private static final long serialVersionUID = 1L;

  CorrectableSidecarException(
      Failure failure, Status.Code code, com.google.rpc.Status rpc, boolean fromSidecar, Throwable cause) {
    super(failure, code, rpc, fromSidecar, cause);
  }
}
