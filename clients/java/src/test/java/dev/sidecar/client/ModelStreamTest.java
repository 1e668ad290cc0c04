package dev.sidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Context;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import dev.sidecar.v1.CallModelRequest;
import dev.sidecar.v1.CallModelResponse;
import dev.sidecar.v1.Failure;
import dev.sidecar.v1.FailureKind;
import dev.sidecar.v1.Hop;
import dev.sidecar.v1.Message;
import dev.sidecar.v1.ReasoningDelta;
import dev.sidecar.v1.ReasoningPart;
import dev.sidecar.v1.RestartCause;
import dev.sidecar.v1.Role;
import dev.sidecar.v1.StreamModelEvent;
import dev.sidecar.v1.StreamRestart;
import dev.sidecar.v1.TextDelta;
import dev.sidecar.v1.ToolCall;
import dev.sidecar.v1.ToolCallDelta;

/** StreamModel through the client, against a scripted server on loopback. */
class ModelStreamTest {
  /** How long a test waits for the server to see something, in seconds. */
  private static final long WAIT_S = 5;

  private FakeSidecar sidecar;
  private SidecarClient client;
  private final CountDownLatch started = new CountDownLatch(1);
  private final CountDownLatch cancelled = new CountDownLatch(1);

  @BeforeEach
  void start() throws Exception {
    sidecar = FakeSidecar.onLoopback();
    client = SidecarClient.connect(sidecar.target());
    sidecar.streamModel = this::script;
    sidecar.callModel =
        (request, response) ->
            response.onError(
                StatusProto.toStatusRuntimeException(
                    RichStatuses.carrying(Status.Code.UNAVAILABLE, RichStatuses.retriesExhausted())));
  }

  @AfterEach
  void stop() throws Exception {
    client.close();
    sidecar.close();
  }

  private static StreamModelEvent text(String text) {
    return StreamModelEvent.newBuilder().setText(TextDelta.newBuilder().setText(text)).build();
  }

  private static StreamModelEvent tool(ToolCallDelta.Builder delta) {
    return StreamModelEvent.newBuilder().setToolCall(delta).build();
  }

  private static StreamModelEvent thinking(ReasoningDelta.Builder delta) {
    return StreamModelEvent.newBuilder().setReasoning(delta).build();
  }

  private static StreamModelEvent finalEvent(CallModelResponse.Builder reply) {
    return StreamModelEvent.newBuilder().setFinal(reply).build();
  }

  private static CallModelResponse.Builder reply(String text) {
    return CallModelResponse.newBuilder()
        .setMessage(Message.newBuilder().setRole(Role.ROLE_ASSISTANT).setText(text));
  }

  private void script(CallModelRequest request, StreamObserver<StreamModelEvent> response) {
    switch (request.getModel()) {
      case "deltas":
        response.onNext(text("Hel"));
        response.onNext(text("lo"));
        response.onNext(
            tool(ToolCallDelta.newBuilder().setIndex(0).setId("call_1").setName("search").setArgumentsFragment("{\"q\":")));
        response.onNext(
            tool(ToolCallDelta.newBuilder().setIndex(1).setId("call_2").setName("fetch").setArgumentsFragment("{}")));
        response.onNext(tool(ToolCallDelta.newBuilder().setIndex(0).setArgumentsFragment("\"x\"}")));
        response.onNext(
            finalEvent(
                reply("Hello")
                    .setServedBy("fast-b")
                    .addHops(
                        Hop.newBuilder()
                            .setDeployment("fast-a")
                            .setKind(FailureKind.FAILURE_KIND_CIRCUIT_OPEN)
                            .setSkipped(true))
                    .addHops(Hop.newBuilder().setDeployment("fast-b").setAttempts(1).setReason("served"))));
        response.onCompleted();
        return;
      case "restart":
        response.onNext(text("Hel"));
        response.onNext(tool(ToolCallDelta.newBuilder().setId("call_0").setName("old")));
        response.onNext(
            StreamModelEvent.newBuilder()
                .setRestart(
                    StreamRestart.newBuilder()
                        .setCause(RestartCause.RESTART_CAUSE_UPSTREAM_FAULT)
                        .setReason("connection dropped")
                        .setAttempt(2))
                .build());
        response.onNext(text("Good"));
        response.onNext(text("bye"));
        response.onNext(finalEvent(reply("Goodbye")));
        response.onCompleted();
        return;
      case "interrupted":
      case "exhausted":
        response.onNext(text("Hello, "));
        response.onNext(text("wo"));
        boolean interrupted = request.getModel().equals("interrupted");
        Failure failure = interrupted ? RichStatuses.streamInterrupted() : RichStatuses.retriesExhausted();
        Status.Code code = interrupted ? Status.Code.ABORTED : Status.Code.UNAVAILABLE;
        response.onError(StatusProto.toStatusRuntimeException(RichStatuses.carrying(code, failure)));
        return;
      case "reasoning":
        response.onNext(thinking(ReasoningDelta.newBuilder().setText("void")));
        response.onNext(StreamModelEvent.newBuilder().setRestart(StreamRestart.newBuilder().setAttempt(2)).build());
        response.onNext(thinking(ReasoningDelta.newBuilder().setText("Let me ")));
        response.onNext(thinking(ReasoningDelta.newBuilder().setText("think.")));
        response.onNext(thinking(ReasoningDelta.newBuilder().setSignature("sig-0")));
        response.onNext(thinking(ReasoningDelta.newBuilder().setIndex(1).setRedactedData("opaque")));
        response.onNext(text("Hi"));
        CallModelResponse.Builder thought = reply("Hi");
        thought
            .getMessageBuilder()
            .addReasoning(ReasoningPart.newBuilder().setText("Let me think.").setSignature("sig-0").setFormat("anthropic"));
        response.onNext(finalEvent(thought));
        response.onCompleted();
        return;
      case "no-final":
        response.onNext(text("Hel"));
        response.onCompleted();
        return;
      case "slow":
        Context.current().addListener(context -> cancelled.countDown(), Runnable::run);
        response.onNext(text("Hel"));
        started.countDown();
        return;
      default:
        response.onError(Status.NOT_FOUND.withDescription("no " + request.getModel()).asRuntimeException());
    }
  }

  private static CallModelRequest model(String model) {
    return CallModelRequest.newBuilder().setModel(model).build();
  }

  @Test
  void aStreamAssemblesItsReasoningSinceTheLastRestart() {
    try (ModelStream stream = client.streamModel(model("reasoning"), Duration.ofSeconds(30))) {
      CallModelResponse reply = stream.collect();
      assertEquals(
          List.of(
              ReasoningPart.newBuilder().setText("Let me think.").setSignature("sig-0").build(),
              ReasoningPart.newBuilder().setRedactedData("opaque").build()),
          stream.reasoning());
      Message next = Messages.assistant(reply);
      assertEquals(reply.getMessage().getReasoningList(), next.getReasoningList());
      assertEquals("anthropic", next.getReasoning(0).getFormat());
    }
  }

  @Test
  void aStreamDeliversItsDeltasThenTheFinalReply() {
    List<StreamModelEvent.EventCase> cases = new ArrayList<>();
    try (ModelStream stream = client.streamModel(model("deltas"), Duration.ofSeconds(30))) {
      for (StreamModelEvent event : stream) {
        cases.add(event.getEventCase());
      }
      assertEquals("Hello", stream.text());
      List<ToolCall> calls = stream.toolCalls();
      assertEquals(2, calls.size());
      assertEquals(
          ToolCall.newBuilder().setId("call_1").setName("search").setArgumentsJson("{\"q\":\"x\"}").build(),
          calls.get(0));
      assertEquals("fetch", calls.get(1).getName());
      CallModelResponse reply = stream.finalResponse().orElseThrow();
      assertEquals("Hello", reply.getMessage().getText());
      assertEquals("fast-b", reply.getServedBy());
      assertEquals(2, reply.getHopsCount());
      assertTrue(reply.getHops(0).getSkipped());
      assertEquals(0, stream.restarts());
    }
    assertEquals(
        List.of(
            StreamModelEvent.EventCase.TEXT,
            StreamModelEvent.EventCase.TEXT,
            StreamModelEvent.EventCase.TOOL_CALL,
            StreamModelEvent.EventCase.TOOL_CALL,
            StreamModelEvent.EventCase.TOOL_CALL,
            StreamModelEvent.EventCase.FINAL),
        cases);
  }

  @Test
  void collectReturnsTheFinalReply() {
    try (ModelStream stream = client.streamModel(model("deltas"))) {
      CallModelResponse reply = stream.collect();
      assertEquals("Hello", reply.getMessage().getText());
      assertEquals("fast-b", reply.getServedBy());
      assertEquals("Hello", stream.text());
    }
  }

  @Test
  void aStreamIsReadOnce() {
    try (ModelStream stream = client.streamModel(model("deltas"))) {
      stream.iterator();
      assertThrows(IllegalStateException.class, stream::iterator);
    }
  }

  @Test
  void aRestartVoidsWhatCameBeforeIt() {
    List<StreamModelEvent.EventCase> cases = new ArrayList<>();
    try (ModelStream stream = client.streamModel(model("restart"))) {
      for (StreamModelEvent event : stream) {
        if (event.hasRestart()) {
          assertEquals(RestartCause.RESTART_CAUSE_UPSTREAM_FAULT, event.getRestart().getCause());
          assertEquals(2, event.getRestart().getAttempt());
          assertEquals("", stream.text());
          assertEquals(List.of(), stream.toolCalls());
        }
        cases.add(event.getEventCase());
      }
      assertEquals("Goodbye", stream.text());
      assertEquals(1, stream.restarts());
      assertEquals("Goodbye", stream.finalResponse().orElseThrow().getMessage().getText());
    }
    assertEquals(
        List.of(
            StreamModelEvent.EventCase.TEXT,
            StreamModelEvent.EventCase.TOOL_CALL,
            StreamModelEvent.EventCase.RESTART,
            StreamModelEvent.EventCase.TEXT,
            StreamModelEvent.EventCase.TEXT,
            StreamModelEvent.EventCase.FINAL),
        cases);
  }

  @Test
  void aStreamFailureIsTheExceptionCallModelThrows() {
    SidecarException unary = assertThrows(SidecarException.class, () -> client.callModel(model("exhausted")));
    List<String> texts = new ArrayList<>();
    try (ModelStream stream = client.streamModel(model("exhausted"))) {
      SidecarException streamed =
          assertThrows(
              SidecarException.class,
              () -> {
                for (StreamModelEvent event : stream) {
                  texts.add(event.getText().getText());
                }
              });
      assertEquals(unary.getClass(), streamed.getClass());
      assertInstanceOf(UncorrectableSidecarException.class, streamed);
      assertEquals(unary.failure(), streamed.failure());
      assertEquals(FailureKind.FAILURE_KIND_UPSTREAM_RETRIES_EXHAUSTED, streamed.kind());
      assertEquals(Status.Code.UNAVAILABLE, streamed.grpcCode());
      assertEquals(Duration.ofMillis(7_500), streamed.retryAfter().orElseThrow());
      assertEquals(429, streamed.http().orElseThrow().statusCode());
      assertEquals(List.of(), streamed.hops());
      assertEquals(List.of("Hello, ", "wo"), texts);
      assertEquals("Hello, wo", stream.text());
      assertSame(streamed, assertThrows(SidecarException.class, stream::collect), "the same failure again");
    }
  }

  @Test
  void streamInterruptedIsItsOwnExceptionWithItsDetailAndHops() {
    try (ModelStream stream = client.streamModel(model("interrupted"))) {
      StreamInterruptedException error = assertThrows(StreamInterruptedException.class, stream::collect);
      assertInstanceOf(UncorrectableSidecarException.class, error);
      assertFalse(error.correctable());
      assertEquals(FailureKind.FAILURE_KIND_STREAM_INTERRUPTED, error.kind());
      assertEquals("STREAM_INTERRUPTED", error.kindName());
      assertEquals(Status.Code.ABORTED, error.grpcCode());
      assertEquals("Hello, wo", error.partialText());
      assertEquals("connection dropped", error.streamDetail().getReason());
      assertEquals(2, error.streamDetail().getDeltasSent());
      assertEquals(error.streamDetail(), error.detail().orElseThrow());
      assertEquals(List.of("fast-a", "fast-b"), error.hops().stream().map(Hop::getDeployment).toList());
      assertTrue(error.hops().get(0).getSkipped());
      assertEquals(error.partialText(), stream.text());
    }
  }

  @Test
  void collectWithoutAFinalEventIsASystemFailure() {
    try (ModelStream stream = client.streamModel(model("no-final"))) {
      SidecarException error = assertThrows(SidecarException.class, stream::collect);
      assertEquals(FailureKind.FAILURE_KIND_SYSTEM, error.kind());
      assertEquals(ModelStream.NO_FINAL_MESSAGE, error.getMessage());
    }
  }

  @Test
  void closingTheStreamAfterABreakCancelsTheRpc() throws Exception {
    try (ModelStream stream = client.streamModel(model("slow"))) {
      for (StreamModelEvent event : stream) {
        assertEquals("Hel", event.getText().getText());
        break;
      }
    }
    assertTrue(cancelled.await(WAIT_S, TimeUnit.SECONDS), "the sidecar saw the cancellation");
  }

  @Test
  void cancelFromAnotherThreadEndsABlockedRead() throws Exception {
    try (ModelStream stream = client.streamModel(model("slow"))) {
      CompletableFuture<SidecarException> outcome =
          CompletableFuture.supplyAsync(
              () -> {
                try {
                  stream.collect();
                  return null;
                } catch (SidecarException error) {
                  return error;
                }
              });
      assertTrue(started.await(WAIT_S, TimeUnit.SECONDS));
      stream.cancel();
      SidecarException error = outcome.get(WAIT_S, TimeUnit.SECONDS);
      assertEquals(FailureKind.FAILURE_KIND_JOB_CANCELLED, error.kind());
      assertEquals(Status.Code.CANCELLED, error.grpcCode());
    }
    assertTrue(cancelled.await(WAIT_S, TimeUnit.SECONDS), "the sidecar saw the cancellation");
  }

  @Test
  void cancellingTheCallersContextCancelsTheStream() throws Exception {
    Context.CancellableContext context = Context.current().withCancellation();
    ModelStream stream = context.call(() -> client.streamModel(model("slow")));
    try {
      assertEquals("Hel", stream.iterator().next().getText().getText());
      assertTrue(started.await(WAIT_S, TimeUnit.SECONDS));
      context.cancel(null);
      SidecarException error = assertThrows(SidecarException.class, stream::collect);
      assertEquals(FailureKind.FAILURE_KIND_JOB_CANCELLED, error.kind());
    } finally {
      stream.close();
    }
    assertTrue(cancelled.await(WAIT_S, TimeUnit.SECONDS), "the sidecar saw the cancellation");
  }
}
