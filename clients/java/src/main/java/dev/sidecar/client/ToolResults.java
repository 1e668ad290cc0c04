package dev.sidecar.client;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import dev.sidecar.v1.ExecuteToolResponse;
import dev.sidecar.v1.ToolCallResult;

/**
 * Turns an ExecuteTool outcome into the message that hands it back to a model.
 *
 * <p>The content is always the response's {@code model_text}: the result's content, or the
 * failure's explanation (message plus retry line). A tool's failure is a result for the model,
 * flagged as an error where the format has a flag.
 *
 * <ul>
 *   <li>OpenAI chat: {@code {"role":"tool","tool_call_id":"...","content":"..."}}
 *   <li>Anthropic: {@code {"type":"tool_result","tool_use_id":"...","content":"...","is_error":true}},
 *       {@code is_error} present only on a failure
 *   <li>the sidecar's own {@link ToolCallResult}, for the next {@code CallModel}
 * </ul>
 *
 * <p>The call id is the response's {@code call_id} (the sidecar echoes the request's) unless one
 * is given.
 */
public final class ToolResults {
  private ToolResults() {}

  /** True when the outcome is a failure. */
  public static boolean isError(ExecuteToolResponse response) {
    return response.hasFailure();
  }

  /** What goes back to the model: {@code model_text}, or the content/explanation if it is empty. */
  public static String modelText(ExecuteToolResponse response) {
    if (!response.getModelText().isEmpty()) {
      return response.getModelText();
    }
    if (response.hasFailure()) {
      return response.getFailure().getExplanation();
    }
    return response.hasResult() ? response.getResult().getContent() : "";
  }

  /** The OpenAI chat tool message, as a map (insertion-ordered). */
  public static Map<String, Object> openAiMessage(ExecuteToolResponse response) {
    return openAiMessage(response, response.getCallId());
  }

  /** The OpenAI chat tool message answering {@code toolCallId}. */
  public static Map<String, Object> openAiMessage(ExecuteToolResponse response, String toolCallId) {
    Map<String, Object> message = new LinkedHashMap<>();
    message.put("role", "tool");
    message.put("tool_call_id", callId(response, toolCallId));
    message.put("content", modelText(response));
    return message;
  }

  /** The OpenAI chat tool message, as JSON. */
  public static String openAiJson(ExecuteToolResponse response) {
    return Json.write(openAiMessage(response));
  }

  /** The OpenAI chat tool message answering {@code toolCallId}, as JSON. */
  public static String openAiJson(ExecuteToolResponse response, String toolCallId) {
    return Json.write(openAiMessage(response, toolCallId));
  }

  /** The Anthropic {@code tool_result} content block, as a map. */
  public static Map<String, Object> anthropicBlock(ExecuteToolResponse response) {
    return anthropicBlock(response, response.getCallId());
  }

  /** The Anthropic {@code tool_result} content block answering {@code toolUseId}. */
  public static Map<String, Object> anthropicBlock(ExecuteToolResponse response, String toolUseId) {
    Map<String, Object> block = new LinkedHashMap<>();
    block.put("type", "tool_result");
    block.put("tool_use_id", callId(response, toolUseId));
    block.put("content", modelText(response));
    if (isError(response)) {
      block.put("is_error", Boolean.TRUE);
    }
    return block;
  }

  /** The Anthropic {@code tool_result} content block, as JSON. */
  public static String anthropicJson(ExecuteToolResponse response) {
    return Json.write(anthropicBlock(response));
  }

  /** The Anthropic {@code tool_result} content block answering {@code toolUseId}, as JSON. */
  public static String anthropicJson(ExecuteToolResponse response, String toolUseId) {
    return Json.write(anthropicBlock(response, toolUseId));
  }

  /** The sidecar's own tool result, to append to the conversation of the next CallModel. */
  public static ToolCallResult toolCallResult(ExecuteToolResponse response, String toolName) {
    return ToolCallResult.newBuilder()
        .setCallId(callId(response, response.getCallId()))
        .setContent(modelText(response))
        .setIsError(isError(response))
        .setName(Objects.requireNonNullElse(toolName, ""))
        .build();
  }

  private static String callId(ExecuteToolResponse response, String given) {
    String id = given == null || given.isEmpty() ? response.getCallId() : given;
    if (id.isEmpty()) {
      throw new IllegalArgumentException("no tool call id: the response echoes none and none was given");
    }
    return id;
  }
}
