package dev.sidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import dev.sidecar.v1.ExecuteToolResponse;
import dev.sidecar.v1.Failure;
import dev.sidecar.v1.ToolCallResult;
import dev.sidecar.v1.ToolResult;

class ToolResultsTest {
  private static final ExecuteToolResponse SUCCESS =
      ExecuteToolResponse.newBuilder()
          .setResult(ToolResult.newBuilder().setContent("{\"title\": \"Q3 \\\"plan\\\"\"}").setStatusCode(200))
          .setModelText("{\"title\": \"Q3 \\\"plan\\\"\"}")
          .setCallId("call_1")
          .setAttempts(1)
          .build();

  private static final Failure FAILURE = RichStatuses.resourceNotFound();

  private static final ExecuteToolResponse FAILED =
      ExecuteToolResponse.newBuilder()
          .setFailure(FAILURE)
          .setModelText(FAILURE.getExplanation())
          .setCallId("toolu_9")
          .setAttempts(1)
          .build();

  @Test
  void openAiSuccessIsAToolMessageWithTheModelText() {
    assertEquals(
        Map.of("role", "tool", "tool_call_id", "call_1", "content", SUCCESS.getModelText()),
        ToolResults.openAiMessage(SUCCESS));
    assertEquals(List.of("role", "tool_call_id", "content"), List.copyOf(ToolResults.openAiMessage(SUCCESS).keySet()));
  }

  @Test
  void openAiFailureCarriesTheExplanationAsContent() {
    JsonObject json = JsonParser.parseString(ToolResults.openAiJson(FAILED)).getAsJsonObject();

    assertEquals("tool", json.get("role").getAsString());
    assertEquals("toolu_9", json.get("tool_call_id").getAsString());
    assertEquals(FAILURE.getExplanation(), json.get("content").getAsString());
    assertTrue(json.get("content").getAsString().endsWith("\n" + FailureKinds.CORRECTABLE_LINE));
    assertEquals(3, json.size());
  }

  @Test
  void anthropicSuccessHasNoErrorFlag() {
    JsonObject json = JsonParser.parseString(ToolResults.anthropicJson(SUCCESS)).getAsJsonObject();

    assertEquals("tool_result", json.get("type").getAsString());
    assertEquals("call_1", json.get("tool_use_id").getAsString());
    assertEquals("{\"title\": \"Q3 \\\"plan\\\"\"}", json.get("content").getAsString());
    assertFalse(json.has("is_error"));
  }

  @Test
  void anthropicFailureIsFlaggedAsAnError() {
    Map<String, Object> block = ToolResults.anthropicBlock(FAILED);

    assertEquals(Boolean.TRUE, block.get("is_error"));
    assertEquals(FAILURE.getExplanation(), block.get("content"));
    JsonObject json = JsonParser.parseString(ToolResults.anthropicJson(FAILED)).getAsJsonObject();
    assertTrue(json.get("is_error").getAsBoolean());
    assertEquals("toolu_9", json.get("tool_use_id").getAsString());
  }

  @Test
  void aGivenCallIdWinsOverTheEchoedOne() {
    assertEquals("other", ToolResults.openAiMessage(SUCCESS, "other").get("tool_call_id"));
    assertEquals("other", ToolResults.anthropicBlock(FAILED, "other").get("tool_use_id"));
  }

  @Test
  void aResponseWithNoCallIdNeedsOne() {
    ExecuteToolResponse anonymous = SUCCESS.toBuilder().clearCallId().build();

    assertThrows(IllegalArgumentException.class, () -> ToolResults.openAiMessage(anonymous));
    assertEquals("c", ToolResults.openAiMessage(anonymous, "c").get("tool_call_id"));
  }

  @Test
  void anEmptyModelTextFallsBackToTheOutcome() {
    ExecuteToolResponse bare = FAILED.toBuilder().clearModelText().build();

    assertEquals(FAILURE.getExplanation(), ToolResults.modelText(bare));
    assertEquals(
        SUCCESS.getResult().getContent(), ToolResults.modelText(SUCCESS.toBuilder().clearModelText().build()));
  }

  @Test
  void theSidecarsOwnToolResultMirrorsTheOutcome() {
    ToolCallResult failed = ToolResults.toolCallResult(FAILED, "get_document");

    assertEquals("toolu_9", failed.getCallId());
    assertEquals(FAILURE.getExplanation(), failed.getContent());
    assertTrue(failed.getIsError());
    assertEquals("get_document", failed.getName());
    assertFalse(ToolResults.toolCallResult(SUCCESS, "search").getIsError());
  }

  @Test
  void controlCharactersAndUnicodeSurviveTheJson() {
    String text = "tab\there \u0001 quote\" backslash\\ line\u2028sep é 🚀";
    ExecuteToolResponse odd = SUCCESS.toBuilder().setModelText(text).build();

    JsonObject json = JsonParser.parseString(ToolResults.openAiJson(odd)).getAsJsonObject();

    assertEquals(text, json.get("content").getAsString());
  }
}
