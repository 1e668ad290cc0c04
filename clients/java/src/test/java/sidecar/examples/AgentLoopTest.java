package sidecar.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import sidecar.client.FakeSidecar;
import sidecar.client.RichStatuses;
import sidecar.client.SidecarClient;
import sidecar.client.UncorrectableSidecarException;
import sidecar.v1.CallModelRequest;
import sidecar.v1.CallModelResponse;
import sidecar.v1.ExecuteToolResponse;
import sidecar.v1.Failure;
import sidecar.v1.ListToolsResponse;
import sidecar.v1.Message;
import sidecar.v1.Role;
import sidecar.v1.ToolCall;
import sidecar.v1.ToolCallResult;
import sidecar.v1.ToolDefinition;
import sidecar.v1.ToolInfo;

/** The example's loop, against a fake sidecar whose model calls one tool and then answers. */
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
