package dev.sidecar.client;

import com.google.common.util.concurrent.ListenableFuture;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.AbstractStub;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import dev.sidecar.v1.CallModelRequest;
import dev.sidecar.v1.CallModelResponse;
import dev.sidecar.v1.ClassifyFailureRequest;
import dev.sidecar.v1.ExecuteToolRequest;
import dev.sidecar.v1.ExecuteToolResponse;
import dev.sidecar.v1.Failure;
import dev.sidecar.v1.ListModelsRequest;
import dev.sidecar.v1.ListModelsResponse;
import dev.sidecar.v1.ListToolsRequest;
import dev.sidecar.v1.ListToolsResponse;
import dev.sidecar.v1.SidecarGrpc;
import dev.sidecar.v1.SidecarGrpc.SidecarBlockingStub;
import dev.sidecar.v1.SidecarGrpc.SidecarFutureStub;

/**
 * A client of the sidecar: every RPC of {@code sidecar.v1.Sidecar}, blocking and asynchronous,
 * over the generated {@link SidecarGrpc} blocking and future stubs.
 *
 * <pre>{@code
 * try (SidecarClient sidecar = SidecarClient.connect("localhost:50051")) {
 *   ExecuteToolResponse out = sidecar.executeTool(request, Duration.ofSeconds(30));
 *   String forTheModel = out.getModelText();         // a tool's failure is a result too
 * }
 * }</pre>
 *
 * <p><b>Failures.</b> A failed RPC throws (blocking) or completes the future exceptionally with
 * (async) a {@link SidecarException}: {@link CorrectableSidecarException} or {@link
 * UncorrectableSidecarException}, rebuilt from the rich status. ExecuteTool does not fail for a
 * tool's failure: the response's {@code failure} is set and {@code model_text} is what goes back
 * to the model (see {@link ToolResults}).
 *
 * <p><b>Streams.</b> {@link #streamModel} gives CallModel's reply as a {@link ModelStream} of
 * events; its failures are the same exceptions, thrown while it is read.
 *
 * <p><b>Deadlines.</b> Every method takes an optional per-call {@link Duration}; without one the
 * client's default timeout applies ({@link #withDefaultTimeout}), and without that, none. The
 * deadline goes to the sidecar as {@code grpc-timeout}, which bounds its retries beneath.
 *
 * <p><b>Cancellation.</b> Cancelling a future returned by an {@code ...Async} method cancels the
 * RPC (stages derived from it with {@code thenApply} etc. do not cancel it). A blocking call is
 * cancelled by interrupting its thread or by cancelling the {@link io.grpc.Context} it runs in
 * ({@code Context.current().withCancellation().run(...)}); either ends it with a
 * {@code JOB_CANCELLED} failure (gRPC code CANCELLED).
 *
 * <p><b>Targets.</b> {@code host:port}, any gRPC target URI ({@code dns:///host:port}), or a Unix
 * domain socket {@code unix:/path/to/socket} / {@code unix:///path/to/socket} (Linux: the netty
 * transport's epoll natives are bundled in grpc-netty-shaded).
 */
public final class SidecarClient implements AutoCloseable {
  /** How long {@link #close()} waits for calls in flight before cutting them. */
  public static final Duration CLOSE_GRACE = Duration.ofSeconds(5);

  private final Channel channel;
  private final ManagedChannel owned;
  private final Duration defaultTimeout;
  private final SidecarBlockingStub blockingStub;
  private final SidecarFutureStub futureStub;

  private SidecarClient(Channel channel, ManagedChannel owned, Duration defaultTimeout) {
    this.channel = Objects.requireNonNull(channel, "channel");
    this.owned = owned;
    this.defaultTimeout = defaultTimeout;
    this.blockingStub = SidecarGrpc.newBlockingStub(channel);
    this.futureStub = SidecarGrpc.newFutureStub(channel);
  }

  /** A client on a channel the caller owns (and closes); no default timeout. */
  public SidecarClient(Channel channel) {
    this(channel, null, null);
  }

  /** Connects in plaintext to {@code target} ({@code host:port} or {@code unix:/path}). */
  public static SidecarClient connect(String target) {
    return connect(target, InsecureChannelCredentials.create());
  }

  /** Connects to {@code target} with the given credentials (e.g. TLS). */
  public static SidecarClient connect(String target, ChannelCredentials credentials) {
    Objects.requireNonNull(target, "target");
    ManagedChannel channel = Grpc.newChannelBuilder(target.trim(), credentials).build();
    return new SidecarClient(channel, channel, null);
  }

  /** Connects to the target named by the environment variable {@code SIDECAR_ADDR}. */
  public static SidecarClient fromEnvironment() {
    String target = System.getenv("SIDECAR_ADDR");
    if (target == null || target.isBlank()) {
      throw new IllegalStateException("SIDECAR_ADDR is not set (e.g. localhost:50051 or unix:/run/sidecar.sock)");
    }
    return connect(target);
  }

  /**
   * A client on the same channel whose calls default to {@code timeout} (null: no deadline).
   * The copy does not own the channel: close the original.
   */
  public SidecarClient withDefaultTimeout(Duration timeout) {
    return new SidecarClient(channel, null, positive(timeout));
  }

  /** The default per-call timeout, or null. */
  public Duration defaultTimeout() {
    return defaultTimeout;
  }

  /** The channel the calls go through. */
  public Channel channel() {
    return channel;
  }

  // ---------------------------------------------------------------- ExecuteTool

  /** Runs one tool call; a tool's failure is an answer with {@code failure} set. */
  public ExecuteToolResponse executeTool(ExecuteToolRequest request) {
    return blocking(stub -> stub.executeTool(need(request)), null);
  }

  /** {@link #executeTool(ExecuteToolRequest)} with a deadline {@code timeout} from now. */
  public ExecuteToolResponse executeTool(ExecuteToolRequest request, Duration timeout) {
    return blocking(stub -> stub.executeTool(need(request)), timeout);
  }

  /** Runs the call {@code callId} of tool {@code tool} with the model's JSON arguments. */
  public ExecuteToolResponse executeTool(String tool, String argumentsJson, String callId) {
    return executeTool(
        ExecuteToolRequest.newBuilder().setTool(tool).setArgumentsJson(argumentsJson).setCallId(callId).build());
  }

  /** Asynchronous {@link #executeTool(ExecuteToolRequest)}; cancelling the future cancels the call. */
  public CompletableFuture<ExecuteToolResponse> executeToolAsync(ExecuteToolRequest request) {
    return async(stub -> stub.executeTool(need(request)), null);
  }

  /** Asynchronous {@link #executeTool(ExecuteToolRequest, Duration)}. */
  public CompletableFuture<ExecuteToolResponse> executeToolAsync(ExecuteToolRequest request, Duration timeout) {
    return async(stub -> stub.executeTool(need(request)), timeout);
  }

  // ---------------------------------------------------------------- CallModel

  /** Sends a conversation to a catalog model; throws a {@link SidecarException} when no reply can be had. */
  public CallModelResponse callModel(CallModelRequest request) {
    return blocking(stub -> stub.callModel(need(request)), null);
  }

  /** {@link #callModel(CallModelRequest)} with a deadline {@code timeout} from now. */
  public CallModelResponse callModel(CallModelRequest request, Duration timeout) {
    return blocking(stub -> stub.callModel(need(request)), timeout);
  }

  /** Asynchronous {@link #callModel(CallModelRequest)}; cancelling the future cancels the call. */
  public CompletableFuture<CallModelResponse> callModelAsync(CallModelRequest request) {
    return async(stub -> stub.callModel(need(request)), null);
  }

  /** Asynchronous {@link #callModel(CallModelRequest, Duration)}. */
  public CompletableFuture<CallModelResponse> callModelAsync(CallModelRequest request, Duration timeout) {
    return async(stub -> stub.callModel(need(request)), timeout);
  }

  // ---------------------------------------------------------------- StreamModel

  /**
   * CallModel, streamed: the reply as events, read with a for-each over the returned {@link
   * ModelStream} (in try-with-resources: closing it cancels the RPC), or {@link
   * ModelStream#collect()} for the final reply. A restart event voids what came before it; a
   * failure is thrown while reading, as {@link #callModel} throws it, after the events before it.
   */
  public ModelStream streamModel(CallModelRequest request) {
    return streamModel(request, null);
  }

  /** {@link #streamModel(CallModelRequest)} with a deadline {@code timeout} from now for the whole stream. */
  public ModelStream streamModel(CallModelRequest request, Duration timeout) {
    SidecarBlockingStub stub = withDeadline(blockingStub, timeout);
    CallModelRequest checked = need(request);
    return new ModelStream(() -> stub.streamModel(checked));
  }

  // ---------------------------------------------------------------- ClassifyFailure

  /** Maps what an agent's own tool saw onto the sidecar's Failure (UNSPECIFIED for a success). */
  public Failure classifyFailure(ClassifyFailureRequest request) {
    return blocking(stub -> stub.classifyFailure(need(request)), null);
  }

  /** {@link #classifyFailure(ClassifyFailureRequest)} with a deadline {@code timeout} from now. */
  public Failure classifyFailure(ClassifyFailureRequest request, Duration timeout) {
    return blocking(stub -> stub.classifyFailure(need(request)), timeout);
  }

  /** Asynchronous {@link #classifyFailure(ClassifyFailureRequest)}. */
  public CompletableFuture<Failure> classifyFailureAsync(ClassifyFailureRequest request) {
    return async(stub -> stub.classifyFailure(need(request)), null);
  }

  /** Asynchronous {@link #classifyFailure(ClassifyFailureRequest, Duration)}. */
  public CompletableFuture<Failure> classifyFailureAsync(ClassifyFailureRequest request, Duration timeout) {
    return async(stub -> stub.classifyFailure(need(request)), timeout);
  }

  // ---------------------------------------------------------------- ListTools, ListModels

  /** The configured tools. */
  public ListToolsResponse listTools() {
    return blocking(stub -> stub.listTools(ListToolsRequest.getDefaultInstance()), null);
  }

  /** The configured tools, with a deadline {@code timeout} from now. */
  public ListToolsResponse listTools(Duration timeout) {
    return blocking(stub -> stub.listTools(ListToolsRequest.getDefaultInstance()), timeout);
  }

  /** Asynchronous {@link #listTools(Duration)} (null: the default timeout). */
  public CompletableFuture<ListToolsResponse> listToolsAsync(Duration timeout) {
    return async(stub -> stub.listTools(ListToolsRequest.getDefaultInstance()), timeout);
  }

  /** The model catalog. */
  public ListModelsResponse listModels() {
    return blocking(stub -> stub.listModels(ListModelsRequest.getDefaultInstance()), null);
  }

  /** The model catalog, with a deadline {@code timeout} from now. */
  public ListModelsResponse listModels(Duration timeout) {
    return blocking(stub -> stub.listModels(ListModelsRequest.getDefaultInstance()), timeout);
  }

  /** Asynchronous {@link #listModels(Duration)} (null: the default timeout). */
  public CompletableFuture<ListModelsResponse> listModelsAsync(Duration timeout) {
    return async(stub -> stub.listModels(ListModelsRequest.getDefaultInstance()), timeout);
  }

  // ---------------------------------------------------------------- plumbing

  private <S extends AbstractStub<S>> S withDeadline(S stub, Duration timeout) {
    Duration effective = timeout != null ? positive(timeout) : defaultTimeout;
    return effective == null ? stub : stub.withDeadlineAfter(effective.toNanos(), TimeUnit.NANOSECONDS);
  }

  private static <Q> Q need(Q request) {
    return Objects.requireNonNull(request, "request");
  }

  private <R> R blocking(Function<SidecarBlockingStub, R> rpc, Duration timeout) {
    SidecarBlockingStub stub = withDeadline(blockingStub, timeout);
    try {
      return rpc.apply(stub);
    } catch (StatusRuntimeException failed) {
      throw SidecarException.fromThrowable(failed);
    }
  }

  private <R> CompletableFuture<R> async(
      Function<SidecarFutureStub, ListenableFuture<R>> rpc, Duration timeout) {
    SidecarFutureStub stub = withDeadline(futureStub, timeout);
    return new CallFuture<>(rpc.apply(stub));
  }

  private static Duration positive(Duration timeout) {
    if (timeout != null && (timeout.isNegative() || timeout.isZero())) {
      throw new IllegalArgumentException("a timeout must be positive: " + timeout);
    }
    return timeout;
  }

  /** Shuts an owned channel down, waiting up to {@link #CLOSE_GRACE} for calls in flight. */
  @Override
  public void close() {
    if (owned == null) {
      return;
    }
    owned.shutdown();
    try {
      if (!owned.awaitTermination(CLOSE_GRACE.toMillis(), TimeUnit.MILLISECONDS)) {
        owned.shutdownNow();
      }
    } catch (InterruptedException interrupted) {
      owned.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  /**
   * The stub's future as a {@link CompletableFuture}: completed from the call (a failure rebuilt
   * as a {@link SidecarException}); cancelling it cancels the call.
   */
  private static final class CallFuture<R> extends CompletableFuture<R> {
    private final ListenableFuture<R> call;

    CallFuture(ListenableFuture<R> call) {
      this.call = call;
      call.addListener(this::settle, Runnable::run);
    }

    private void settle() {
      try {
        complete(call.get());
      } catch (ExecutionException failed) {
        completeExceptionally(SidecarException.fromThrowable(failed.getCause()));
      } catch (CancellationException cancelled) {
        super.cancel(false);
      } catch (InterruptedException interrupted) {
        // Unreachable: the call is done when its listeners run.
        Thread.currentThread().interrupt();
        completeExceptionally(SidecarException.fromThrowable(interrupted));
      }
    }

    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
      boolean cancelled = super.cancel(mayInterruptIfRunning);
      if (cancelled) {
        call.cancel(true);
      }
      return cancelled;
    }
  }
}
