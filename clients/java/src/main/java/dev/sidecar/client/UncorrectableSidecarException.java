package dev.sidecar.client;

import io.grpc.Status;
import dev.sidecar.v1.Failure;

/**
 * The tool or model cannot do this now: only another approach can help. STREAM_INTERRUPTED is
 * the subclass {@link StreamInterruptedException}; it is not open to other subclasses.
 */
public class UncorrectableSidecarException extends SidecarException {
  private static final long serialVersionUID = 1L;

  UncorrectableSidecarException(
      Failure failure, Status.Code code, com.google.rpc.Status rpc, boolean fromSidecar, Throwable cause) {
    super(failure, code, rpc, fromSidecar, cause);
  }
}
