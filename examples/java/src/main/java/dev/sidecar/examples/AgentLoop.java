package dev.sidecar.examples;

import java.io.PrintStream;
import java.time.Duration;
import java.util.Arrays;
import java.util.function.Consumer;
import dev.sidecar.client.ModelStream;
import dev.sidecar.client.SidecarClient;
import dev.sidecar.client.SidecarException;
import dev.sidecar.client.ToolResults;
import dev.sidecar.v1.CallModelRequest;
import dev.sidecar.v1.CallModelResponse;
import dev.sidecar.v1.ExecuteToolRequest;
import dev.sidecar.v1.ExecuteToolResponse;
import dev.sidecar.v1.Message;
import dev.sidecar.v1.Role;
import dev.sidecar.v1.StreamModelEvent;
import dev.sidecar.v1.ToolCall;
import dev.sidecar.v1.ToolInfo;

/**
 * An agent loop on the sidecar: call the model, run its tool calls through ExecuteTool, hand
 * each {@code model_text} back (a tool's failure is a result the model reads), repeat until the
 * model answers. Rate limits, overloads and unusable replies are handled beneath, in the sidecar.
 *
 * <p>Streamed ({@code --stream}), each reply is a StreamModel call whose events are shown as they
 * come: a {@code restart} voids what was shown since the last one, and the loop uses the final
 * reply. A stream's failure is the {@code SidecarException} its callModel would throw.
 *
 * <pre>SIDECAR_ADDR=localhost:50051 java ... dev.sidecar.examples.AgentLoop [--stream] [model] "question"</pre>
 */
public final class AgentLoop {
  /** Model turns before giving up. */
  public static final int MAX_TURNS = 8;

  private AgentLoop() {}

  /** Each model call's deadline; the retries beneath stay within it. */
  public static final Duration MODEL_TIMEOUT = Duration.ofMinutes(2);

  /** Runs the loop and returns the model's answer. */
  public static String run(SidecarClient sidecar, String model, String question) {
    return run(sidecar, model, question, null);
  }

  /**
   * Runs the loop and returns the model's answer; with {@code show} (not null), each reply is
   * streamed and every event goes to {@code show} as it arrives.
   */
  public static String run(SidecarClient sidecar, String model, String question, Consumer<StreamModelEvent> show) {
    CallModelRequest.Builder conversation =
        CallModelRequest.newBuilder()
            .setModel(model)
            .setSystem("Answer the question. Use the tools when they help.")
            .addMessages(Message.newBuilder().setRole(Role.ROLE_USER).setText(question));
    for (ToolInfo tool : sidecar.listTools(Duration.ofSeconds(10)).getToolsList()) {
      conversation.addTools(tool.getDefinition());
    }
    for (int turn = 1; turn <= MAX_TURNS; turn++) {
      CallModelResponse reply = reply(sidecar, conversation.build(), show);
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

  /** One model call: callModel, or streamModel with each event shown as it comes. */
  private static CallModelResponse reply(SidecarClient sidecar, CallModelRequest request, Consumer<StreamModelEvent> show) {
    if (show == null) {
      return sidecar.callModel(request, MODEL_TIMEOUT);
    }
    try (ModelStream stream = sidecar.streamModel(request, MODEL_TIMEOUT)) {
      for (StreamModelEvent event : stream) {
        show.accept(event);
      }
      return stream.collect(); // the whole reply, whatever restarts came before it
    }
  }

  /** Shows a stream on a terminal: text as it comes; a restart voids what was printed, and says so. */
  public static Consumer<StreamModelEvent> printEvents(PrintStream out) {
    return event -> {
      if (event.hasText()) {
        out.print(event.getText().getText());
      } else if (event.hasRestart()) {
        out.print("\n--- restarted (" + event.getRestart().getReason() + "): discard the text above ---\n");
      } else if (event.hasFinal() && !event.getFinal().getMessage().getText().isEmpty()) {
        out.print("\n"); // the reply's last line ends
      }
      out.flush();
    };
  }

  /** The first model of the sidecar's catalog. */
  public static String firstModel(SidecarClient sidecar) {
    return sidecar.listModels(Duration.ofSeconds(10)).getModelsList().stream()
        .findFirst()
        .orElseThrow(() -> new IllegalStateException("the sidecar's catalog is empty"))
        .getId();
  }

  /** {@code [--stream] [model] question}; the sidecar is {@code SIDECAR_ADDR}. */
  public static void main(String[] argv) {
    boolean streamed = argv.length > 0 && argv[0].equals("--stream");
    String[] args = streamed ? Arrays.copyOfRange(argv, 1, argv.length) : argv;
    if (args.length == 0) {
      System.err.println("usage: AgentLoop [--stream] [model] question   (SIDECAR_ADDR=host:port or unix:/path)");
      System.exit(2);
    }
    try (SidecarClient sidecar = SidecarClient.fromEnvironment()) {
      String model = args.length > 1 ? args[0] : firstModel(sidecar);
      String answer = run(sidecar, model, args[args.length - 1], streamed ? printEvents(System.out) : null);
      if (!streamed) { // streamed, it has been printed as it came
        System.out.println(answer);
      }
    } catch (SidecarException failed) {
      System.err.println(failed.kindName() + " (gRPC " + failed.grpcCode() + "): " + failed.explanation());
      System.exit(1);
    }
  }
}
