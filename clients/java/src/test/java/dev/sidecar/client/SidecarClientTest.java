package dev.sidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Context;
import io.grpc.Deadline;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import dev.sidecar.v1.CallModelRequest;
import dev.sidecar.v1.CallModelResponse;
import dev.sidecar.v1.ClassifyFailureRequest;
import dev.sidecar.v1.ExecuteToolRequest;
import dev.sidecar.v1.ExecuteToolResponse;
import dev.sidecar.v1.Failure;
import dev.sidecar.v1.FailureKind;
import dev.sidecar.v1.ListModelsResponse;
import dev.sidecar.v1.ListToolsResponse;
import dev.sidecar.v1.Message;
import dev.sidecar.v1.ModelInfo;
import dev.sidecar.v1.Role;
import dev.sidecar.v1.ToolDefinition;
import dev.sidecar.v1.ToolInfo;
import dev.sidecar.v1.ToolResult;

/** The client against a real gRPC server on loopback. */
class SidecarClientTest {
  private FakeSidecar sidecar;
  private SidecarClient client;

  @BeforeEach
  void start() throws Exception {
    sidecar = FakeSidecar.onLoopback();
    client = SidecarClient.connect(sidecar.target());
  }

  @AfterEach
  void stop() throws Exception {
    client.close();
    sidecar.close();
  }

  @Test
  void aToolResultComesBackAsAnAnswer() {
    sidecar.executeTool =
        (request, response) -> {
          response.onNext(
              ExecuteToolResponse.newBuilder()
                  .setResult(ToolResult.newBuilder().setContent("42 " + request.getArgumentsJson()))
                  .setModelText("42 " + request.getArgumentsJson())
                  .setCallId(request.getCallId())
                  .build());
          response.onCompleted();
        };

    ExecuteToolResponse out = client.executeTool("answer", "{}", "call_7");

    assertEquals("42 {}", out.getModelText());
    assertEquals("call_7", out.getCallId());
  }

  @Test
  void aToolFailureIsAnAnswerNotAnException() {
    Failure failure = RichStatuses.resourceNotFound();
    sidecar.executeTool =
        (request, response) -> {
          response.onNext(
              ExecuteToolResponse.newBuilder()
                  .setFailure(failure)
                  .setModelText(failure.getExplanation())
                  .setCallId(request.getCallId())
                  .build());
          response.onCompleted();
        };

    ExecuteToolResponse out = client.executeTool("get_document", "{\"id\":\"doc-42\"}", "call_1");

    assertTrue(out.hasFailure());
    assertEquals(failure.getExplanation(), out.getModelText());
    assertEquals(Boolean.TRUE, ToolResults.anthropicBlock(out).get("is_error"));
  }

  @Test
  void aFailedCallModelThrowsTheRebuiltFailure() {
    Failure failure = RichStatuses.retriesExhausted();
    sidecar.callModel =
        (request, response) ->
            response.onError(
                StatusProto.toStatusRuntimeException(RichStatuses.carrying(Status.Code.UNAVAILABLE, failure)));

    UncorrectableSidecarException error =
        assertThrows(UncorrectableSidecarException.class, () -> client.callModel(conversation("hi")));

    assertEquals(failure, error.failure());
    assertEquals(Status.Code.UNAVAILABLE, error.grpcCode());
    assertEquals(Duration.ofMillis(7_500), error.retryAfter().orElseThrow());
  }

  @Test
  void anAsyncFailureCompletesTheFutureWithTheRebuiltFailure() {
    Failure failure = RichStatuses.invalidInput();
    sidecar.callModel =
        (request, response) ->
            response.onError(
                StatusProto.toStatusRuntimeException(RichStatuses.carrying(Status.Code.INVALID_ARGUMENT, failure)));

    CompletableFuture<CallModelResponse> future = client.callModelAsync(conversation("hi"), Duration.ofSeconds(5));

    ExecutionException wrapped = assertThrows(ExecutionException.class, () -> future.get(5, TimeUnit.SECONDS));
    CorrectableSidecarException error = assertInstanceOf(CorrectableSidecarException.class, wrapped.getCause());
    assertEquals("INVALID_INPUT", error.kindName());
  }

  @Test
  void anAsyncAnswerCompletesTheFuture() throws Exception {
    sidecar.callModel =
        (request, response) -> {
          response.onNext(
              CallModelResponse.newBuilder()
                  .setMessage(Message.newBuilder().setRole(Role.ROLE_ASSISTANT).setText("hello"))
                  .build());
          response.onCompleted();
        };

    CallModelResponse reply = client.callModelAsync(conversation("hi")).get(5, TimeUnit.SECONDS);

    assertEquals("hello", reply.getMessage().getText());
  }

  @Test
  void thePerCallDeadlineReachesTheSidecar() {
    AtomicReference<Deadline> seen = new AtomicReference<>();
    sidecar.listModels =
        (request, response) -> {
          seen.set(Context.current().getDeadline());
          response.onNext(ListModelsResponse.newBuilder().addModels(ModelInfo.newBuilder().setId("m1")).build());
          response.onCompleted();
        };

    assertEquals("m1", client.listModels(Duration.ofSeconds(30)).getModels(0).getId());

    long left = seen.get().timeRemaining(TimeUnit.SECONDS);
    assertTrue(left > 20 && left <= 30, "deadline seen by the sidecar: " + left + " s");
  }

  @Test
  void theDefaultTimeoutAppliesWhenNoneIsGiven() {
    AtomicReference<Deadline> seen = new AtomicReference<>();
    sidecar.listTools =
        (request, response) -> {
          seen.set(Context.current().getDeadline());
          response.onNext(
              ListToolsResponse.newBuilder()
                  .addTools(ToolInfo.newBuilder().setDefinition(ToolDefinition.newBuilder().setName("search")))
                  .build());
          response.onCompleted();
        };

    SidecarClient bounded = client.withDefaultTimeout(Duration.ofSeconds(9));
    assertEquals("search", bounded.listTools().getTools(0).getDefinition().getName());
    assertTrue(seen.get().timeRemaining(TimeUnit.SECONDS) <= 9);

    client.listTools();
    assertEquals(null, seen.get());
  }

  @Test
  void aPassedDeadlineIsAJobTimeout() {
    sidecar.classifyFailure = (request, response) -> { /* never answers */ };

    UncorrectableSidecarException error =
        assertThrows(
            UncorrectableSidecarException.class,
            () -> client.classifyFailure(ClassifyFailureRequest.getDefaultInstance(), Duration.ofMillis(200)));

    assertEquals(FailureKind.FAILURE_KIND_JOB_TIMEOUT, error.kind());
    assertEquals(Status.Code.DEADLINE_EXCEEDED, error.grpcCode());
  }

  @Test
  void cancellingTheFutureCancelsTheCall() throws Exception {
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch cancelled = new CountDownLatch(1);
    sidecar.callModel =
        (request, response) -> {
          Context.current().addListener(context -> cancelled.countDown(), Runnable::run);
          started.countDown();
        };

    CompletableFuture<CallModelResponse> future = client.callModelAsync(conversation("slow"));
    assertTrue(started.await(5, TimeUnit.SECONDS));
    assertTrue(future.cancel(true));

    assertTrue(cancelled.await(5, TimeUnit.SECONDS), "the sidecar saw the cancellation");
    assertThrows(CancellationException.class, future::join);
  }

  @Test
  void cancellingTheContextCancelsABlockingCall() throws Exception {
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch cancelled = new CountDownLatch(1);
    sidecar.callModel =
        (request, response) -> {
          Context.current().addListener(context -> cancelled.countDown(), Runnable::run);
          started.countDown();
        };
    Context.CancellableContext context = Context.current().withCancellation();
    CompletableFuture<SidecarException> outcome = new CompletableFuture<>();
    Thread caller =
        new Thread(
            context.wrap(
                () -> {
                  try {
                    client.callModel(conversation("slow"));
                    outcome.complete(null);
                  } catch (SidecarException error) {
                    outcome.complete(error);
                  }
                }));
    caller.start();
    assertTrue(started.await(5, TimeUnit.SECONDS));

    context.cancel(null);

    SidecarException error = outcome.get(5, TimeUnit.SECONDS);
    assertEquals(FailureKind.FAILURE_KIND_JOB_CANCELLED, error.kind());
    assertEquals(Status.Code.CANCELLED, error.grpcCode());
    assertTrue(cancelled.await(5, TimeUnit.SECONDS), "the sidecar saw the cancellation");
  }

  @Test
  void anUnreachableSidecarIsAnExternalServiceFailure() throws Exception {
    String target = sidecar.target();
    sidecar.close();
    try (SidecarClient orphan = SidecarClient.connect(target)) {
      UncorrectableSidecarException error =
          assertThrows(UncorrectableSidecarException.class, () -> orphan.listTools(Duration.ofSeconds(5)));
      assertEquals(Status.Code.UNAVAILABLE, error.grpcCode());
      assertEquals(FailureKind.FAILURE_KIND_EXTERNAL_SERVICE, error.kind());
      assertFalse(error.fromSidecar());
    }
  }

  @Test
  void aNonPositiveTimeoutIsRefused() {
    assertThrows(IllegalArgumentException.class, () -> client.listTools(Duration.ZERO));
    assertThrows(IllegalArgumentException.class, () -> client.withDefaultTimeout(Duration.ofSeconds(-1)));
  }

  static CallModelRequest conversation(String text) {
    return CallModelRequest.newBuilder()
        .setModel("m1")
        .addMessages(Message.newBuilder().setRole(Role.ROLE_USER).setText(text))
        .build();
  }
}
