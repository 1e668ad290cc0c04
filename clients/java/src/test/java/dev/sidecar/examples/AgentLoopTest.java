package dev.sidecar.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import dev.sidecar.client.FakeSidecar;
import dev.sidecar.client.RichStatuses;
import dev.sidecar.client.SidecarClient;
import dev.sidecar.client.StreamInterruptedException;
import dev.sidecar.client.UncorrectableSidecarException;
import dev.sidecar.v1.CallModelRequest;
import dev.sidecar.v1.CallModelResponse;
import dev.sidecar.v1.ExecuteToolResponse;
import dev.sidecar.v1.Failure;
import dev.sidecar.v1.ListToolsResponse;
import dev.sidecar.v1.Message;
import dev.sidecar.v1.RestartCause;
import dev.sidecar.v1.Role;
import dev.sidecar.v1.StreamModelEvent;
import dev.sidecar.v1.StreamRestart;
import dev.sidecar.v1.TextDelta;
import dev.sidecar.v1.ToolCall;
import dev.sidecar.v1.ToolCallDelta;
import dev.sidecar.v1.ToolCallResult;
import dev.sidecar.v1.ToolDefinition;
import dev.sidecar.v1.ToolInfo;

/**
 * The example's loop, against a fake sidecar whose model calls one tool and then answers (called
 * and streamed); and against a real sidecar at {@code SIDECAR_ADDR} when it is set ({@code make
 * clients-examples} starts one).
 */
class AgentLoopTest {
  private FakeSidecar sidecar;
  private SidecarClient client;
  private final List<CallModelRequest> modelCalls = new CopyOnWriteArrayList<>();

  @BeforeEach
  void start() throws Exception {
    sidecar = FakeSidecar.onLoopback();
    client = SidecarClient.connect(sidecar.target());
    sidecar.listTools =
        (request, response) -> {
          response.onNext(
              ListToolsResponse.newBuilder()
                  .addTools(ToolInfo.newBuilder().setDefinition(ToolDefinition.newBuilder().setName("get_document")))
                  .build());
          response.onCompleted();
        };
  }

  @AfterEach
  void stop() throws Exception {
    client.close();
    sidecar.close();
  }

  @Test
  void aToolFailureGoesBackToTheModelWhichThenAnswers() {
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
    sidecar.callModel =
        (request, response) -> {
          modelCalls.add(request);
          Message.Builder said = Message.newBuilder().setRole(Role.ROLE_ASSISTANT);
          if (modelCalls.size() == 1) {
            said.addToolCalls(
                ToolCall.newBuilder().setId("call_1").setName("get_document").setArgumentsJson("{\"id\":\"doc-42\"}"));
          } else {
            said.setText("There is no doc-42.");
          }
          response.onNext(CallModelResponse.newBuilder().setMessage(said).build());
          response.onCompleted();
        };

    String answer = AgentLoop.run(client, "m1", "What is in doc-42?");

    assertEquals("There is no doc-42.", answer);
    assertEquals(2, modelCalls.size());
    CallModelRequest second = modelCalls.get(1);
    assertEquals("get_document", second.getTools(0).getName());
    Message handedBack = second.getMessages(second.getMessagesCount() - 1);
    assertEquals(Role.ROLE_TOOL, handedBack.getRole());
    ToolCallResult result = handedBack.getToolResults(0);
    assertEquals("call_1", result.getCallId());
    assertEquals(failure.getExplanation(), result.getContent());
    assertTrue(result.getIsError());
  }

  private static StreamModelEvent text(String text) {
    return StreamModelEvent.newBuilder().setText(TextDelta.newBuilder().setText(text)).build();
  }

  /** The model streams a false start, a restart, the tool call in two fragments; then the answer in two halves. */
  private void streamedModel(Failure breakAnswer) {
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
    sidecar.streamModel =
        (request, response) -> {
          modelCalls.add(request);
          if (modelCalls.size() == 1) {
            ToolCall call =
                ToolCall.newBuilder().setId("call_1").setName("get_document").setArgumentsJson("{\"id\":\"doc-42\"}").build();
            response.onNext(text("Let me "));
            response.onNext(
                StreamModelEvent.newBuilder()
                    .setRestart(
                        StreamRestart.newBuilder()
                            .setCause(RestartCause.RESTART_CAUSE_UPSTREAM_FAULT)
                            .setReason("connection dropped")
                            .setAttempt(2))
                    .build());
            response.onNext(text("Looking it up."));
            response.onNext(
                StreamModelEvent.newBuilder()
                    .setToolCall(ToolCallDelta.newBuilder().setId("call_1").setName("get_document").setArgumentsFragment("{\"id\":"))
                    .build());
            response.onNext(
                StreamModelEvent.newBuilder()
                    .setToolCall(ToolCallDelta.newBuilder().setArgumentsFragment("\"doc-42\"}"))
                    .build());
            Message said = Message.newBuilder().setRole(Role.ROLE_ASSISTANT).setText("Looking it up.").addToolCalls(call).build();
            response.onNext(StreamModelEvent.newBuilder().setFinal(CallModelResponse.newBuilder().setMessage(said)).build());
            response.onCompleted();
            return;
          }
          response.onNext(text("There is "));
          if (breakAnswer != null) {
            response.onError(StatusProto.toStatusRuntimeException(RichStatuses.carrying(Status.Code.ABORTED, breakAnswer)));
            return;
          }
          response.onNext(text("no doc-42."));
          Message said = Message.newBuilder().setRole(Role.ROLE_ASSISTANT).setText("There is no doc-42.").build();
          response.onNext(StreamModelEvent.newBuilder().setFinal(CallModelResponse.newBuilder().setMessage(said)).build());
          response.onCompleted();
        };
  }

  /** What a terminal keeps of each streamed reply: its text since its last restart. */
  private static final class Screen {
    final List<String> replies = new ArrayList<>();
    final List<String> restarts = new ArrayList<>();
    final StringBuilder current = new StringBuilder();

    void show(StreamModelEvent event) {
      if (event.hasText()) {
        current.append(event.getText().getText());
      } else if (event.hasRestart()) {
        restarts.add(event.getRestart().getReason());
        current.setLength(0);
      } else if (event.hasFinal()) {
        replies.add(current.toString());
        current.setLength(0);
      }
    }
  }

  @Test
  void streamedTheLoopShowsEachEventAndVoidsWhatARestartVoids() {
    streamedModel(null);
    Screen screen = new Screen();

    String answer = AgentLoop.run(client, "m1", "What is in doc-42?", screen::show);

    assertEquals("There is no doc-42.", answer);
    assertEquals(List.of("connection dropped"), screen.restarts);
    assertEquals(List.of("Looking it up.", "There is no doc-42."), screen.replies);
    Message handedBack = modelCalls.get(1).getMessages(modelCalls.get(1).getMessagesCount() - 1);
    assertEquals(Role.ROLE_TOOL, handedBack.getRole());
    assertEquals("call_1", handedBack.getToolResults(0).getCallId());
    assertTrue(handedBack.getToolResults(0).getIsError());
  }

  @Test
  void streamedTheLoopPrintsDeltasAsTheyComeAndMarksARestart() {
    streamedModel(null);
    ByteArrayOutputStream printed = new ByteArrayOutputStream();

    AgentLoop.run(
        client, "m1", "What is in doc-42?", AgentLoop.printEvents(new PrintStream(printed, true, StandardCharsets.UTF_8)));

    assertEquals(
        "Let me \n--- restarted (connection dropped): discard the text above ---\nLooking it up.\nThere is no doc-42.\n",
        printed.toString(StandardCharsets.UTF_8));
  }

  @Test
  void streamedAStreamsFailureEndsTheLoopAsCallModelsWould() {
    streamedModel(RichStatuses.streamInterrupted());
    Screen screen = new Screen();

    StreamInterruptedException error =
        assertThrows(
            StreamInterruptedException.class, () -> AgentLoop.run(client, "m1", "What is in doc-42?", screen::show));

    assertEquals("STREAM_INTERRUPTED", error.kindName());
    assertEquals(Status.Code.ABORTED, error.grpcCode());
    assertEquals("There is ", screen.current.toString()); // what the stream had sent; no final came
  }

  /** The loop against {@code SIDECAR_ADDR} (make clients-examples), called and streamed. */
  @Test
  void againstARealSidecarBothWays() {
    String address = System.getenv("SIDECAR_ADDR");
    assumeTrue(address != null && !address.isBlank(), "SIDECAR_ADDR is not set");
    try (SidecarClient real = SidecarClient.connect(address)) {
      String model = System.getenv("SIDECAR_MODEL");
      if (model == null || model.isBlank()) {
        model = AgentLoop.firstModel(real);
      }
      String question = "Find what the documentation says about retries.";
      assertFalse(AgentLoop.run(real, model, question).isEmpty());
      Screen screen = new Screen();
      String answer = AgentLoop.run(real, model, question, screen::show);
      assertFalse(answer.isEmpty());
      assertTrue(screen.replies.size() >= 2, "a tool call, then the answer: " + screen.replies);
      assertEquals(answer, screen.replies.get(screen.replies.size() - 1));
    }
  }

  @Test
  void aModelThatCannotAnswerEndsTheLoopWithItsFailure() {
    sidecar.callModel =
        (request, response) ->
            response.onError(
                StatusProto.toStatusRuntimeException(
                    RichStatuses.carrying(Status.Code.UNAVAILABLE, RichStatuses.retriesExhausted())));

    UncorrectableSidecarException error =
        assertThrows(UncorrectableSidecarException.class, () -> AgentLoop.run(client, "m1", "hi"));

    assertEquals("UPSTREAM_RETRIES_EXHAUSTED", error.kindName());
  }
}
