package dev.sidecar.client;

import io.grpc.Status;
import dev.sidecar.v1.Failure;
import dev.sidecar.v1.StreamDetail;

/**
 * STREAM_INTERRUPTED: a stream was cut after deltas had reached the caller and was not restarted
 * (the call's {@code mid_stream} policy, or no retry left). The partial output is here; retry at
 * a higher level, or keep it.
 */
public final class StreamInterruptedException extends UncorrectableSidecarException {
  private static final long serialVersionUID = 1L;

  StreamInterruptedException(
      Failure failure, Status.Code code, com.google.rpc.Status rpc, boolean fromSidecar, Throwable cause) {
    super(failure, code, rpc, fromSidecar, cause);
  }

  /** What the stream had sent: partial text, why it ended, the deltas sent. */
  public StreamDetail streamDetail() {
    return failure().getStream();
  }

  /** The text deltas already sent, joined. */
  public String partialText() {
    return streamDetail().getPartialText();
  }
}
