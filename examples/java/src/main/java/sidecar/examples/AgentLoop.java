package sidecar.examples;

import java.time.Duration;
import sidecar.client.SidecarClient;
import sidecar.client.SidecarException;
import sidecar.client.ToolResults;
import sidecar.v1.CallModelRequest;
import sidecar.v1.CallModelResponse;
import sidecar.v1.ExecuteToolRequest;
import sidecar.v1.ExecuteToolResponse;
import sidecar.v1.Message;
import sidecar.v1.Role;
import sidecar.v1.ToolCall;
import sidecar.v1.ToolInfo;

/**
 * An agent loop on the sidecar: call the model, run its tool calls through ExecuteTool, hand
 * each {@code model_text} back (a tool's failure is a result the model reads), repeat until the
 * model answers. Rate limits, overloads and unusable replies are handled beneath, in the sidecar.
 *
 * <pre>SIDECAR_ADDR=localhost:50051 java ... sidecar.examples.AgentLoop [model] "question"</pre>
 */
public final class AgentLoop {
  /** Model turns before giving up. */
  public static final int MAX_TURNS = 8;

  private AgentLoop() {}

  /** Runs the loop and returns the model's answer. */
  public static String run(SidecarClient sidecar, String model, String question) {
    CallModelRequest.Builder conversation =
        CallModelRequest.newBuilder()
            .setModel(model)
            .setSystem("Answer the question. Use the tools when they help.")
            .addMessages(Message.newBuilder().setRole(Role.ROLE_USER).setText(question));
    for (ToolInfo tool : sidecar.listTools(Duration.ofSeconds(10)).getToolsList()) {
      conversation.addTools(tool.getDefinition());
    }
    for (int turn = 1; turn <= MAX_TURNS; turn++) {
      CallModelResponse reply = sidecar.callModel(conversation.build(), Duration.ofMinutes(2));
      Message said = reply.getMessage();
      conversation.addMessages(said);
      if (said.getToolCallsCount() == 0) {
        return said.getText();
      }
      Message.Builder results = Message.newBuilder().setRole(Role.ROLE_TOOL);
      for (ToolCall call : said.getToolCallsList()) {
        ExecuteToolResponse outcome =
            sidecar.executeTool(
                ExecuteToolRequest.newBuilder()
                    .setTool(call.getName())
                    .setArgumentsJson(call.getArgumentsJson())
                    .setCallId(call.getId())
                    .build(),
                Duration.ofSeconds(60));
        System.err.printf("turn %d: %s -> %s%n", turn, call.getName(), outcome.hasFailure() ? "failure" : "result");
        results.addToolResults(ToolResults.toolCallResult(outcome, call.getName()));
      }
      conversation.addMessages(results);
    }
    throw new IllegalStateException("no answer after " + MAX_TURNS + " model turns");
  }

  private static String firstModel(SidecarClient sidecar) {
    return sidecar.listModels(Duration.ofSeconds(10)).getModelsList().stream()
        .findFirst()
        .orElseThrow(() -> new IllegalStateException("the sidecar's catalog is empty"))
        .getId();
  }

  /** {@code [model] question}; the sidecar is {@code SIDECAR_ADDR}. */
  public static void main(String[] args) {
    if (args.length == 0) {
      System.err.println("usage: AgentLoop [model] question   (SIDECAR_ADDR=host:port or unix:/path)");
      System.exit(2);
    }
    try (SidecarClient sidecar = SidecarClient.fromEnvironment()) {
      String model = args.length > 1 ? args[0] : firstModel(sidecar);
      System.out.println(run(sidecar, model, args[args.length - 1]));
    } catch (SidecarException failed) {
      System.err.println(failed.kindName() + " (gRPC " + failed.grpcCode() + "): " + failed.explanation());
      System.exit(1);
    }
  }
}
