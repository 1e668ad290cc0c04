package dev.sidecar.client;

import java.util.Arrays;
import java.util.Map;
import dev.sidecar.v1.CacheBreakpoint;
import dev.sidecar.v1.CacheTtl;
import dev.sidecar.v1.CompactionStrategy;
import dev.sidecar.v1.OverflowAction;
import dev.sidecar.v1.OverflowPolicy;
import dev.sidecar.v1.Reasoning;
import dev.sidecar.v1.ReasoningEffort;
import dev.sidecar.v1.ToolChoice;
import dev.sidecar.v1.ToolChoiceMode;

/**
 * Values for a {@code CallModelRequest}'s controls, beside its generated builder's setters.
 *
 * <pre>{@code
 * CallModelRequest request = CallModelRequest.newBuilder()
 *     .setModel("claude").addMessages(question)
 *     .setReasoning(Requests.reasoningBudget(2048))
 *     .setToolChoice(Requests.toolChoice("required"))
 *     .addStop("\n").setTopP(0.9)
 *     .setSystem(longPrompt).setSystemCache(Requests.cache(CacheTtl.CACHE_TTL_1H))
 *     .setProviderOptionsJson(Requests.providerOptions(Map.of("anthropic", Map.of("metadata", Map.of("user_id", "u")))))
 *     .setOnOverflow(Requests.compactOnOverflow(CompactionStrategy.COMPACTION_STRATEGY_TOOL_RESULTS))
 *     .build();
 * }</pre>
 */
public final class Requests {
  private Requests() {}

  /** Reasoning as a level. */
  public static Reasoning reasoningEffort(ReasoningEffort effort) {
    return Reasoning.newBuilder().setEffort(effort).build();
  }

  /** Reasoning as a token budget. */
  public static Reasoning reasoningBudget(int tokens) {
    if (tokens < 0) {
      throw new IllegalArgumentException("a reasoning budget is a number of tokens, not " + tokens);
    }
    return Reasoning.newBuilder().setBudgetTokens(tokens).build();
  }

  /** {@code "auto"}, {@code "none"}, {@code "required"}, or the name of the tool the model must call. */
  public static ToolChoice toolChoice(String choice) {
    if (choice == null || choice.isEmpty()) {
      throw new IllegalArgumentException("a tool choice is auto, none, required or a tool's name");
    }
    switch (choice) {
      case "auto":
        return ToolChoice.newBuilder().setMode(ToolChoiceMode.TOOL_CHOICE_MODE_AUTO).build();
      case "none":
        return ToolChoice.newBuilder().setMode(ToolChoiceMode.TOOL_CHOICE_MODE_NONE).build();
      case "required":
        return ToolChoice.newBuilder().setMode(ToolChoiceMode.TOOL_CHOICE_MODE_REQUIRED).build();
      default:
        return ToolChoice.newBuilder().setMode(ToolChoiceMode.TOOL_CHOICE_MODE_TOOL).setName(choice).build();
    }
  }

  /** A cache breakpoint living {@code ttl} (CACHE_TTL_UNSPECIFIED: the provider's default). */
  public static CacheBreakpoint cache(CacheTtl ttl) {
    return CacheBreakpoint.newBuilder().setTtl(ttl).build();
  }

  /**
   * The request's {@code on_overflow} that compacts a conversation that does not fit the model's
   * window and tries again, trying {@code strategies} in the order given (none: the model's
   * configured order); the call fails with CONTEXT_OVERFLOW only when even the compacted
   * conversation does not fit. Adopt the compacted history with {@link Messages#compacted}.
   */
  public static OverflowPolicy compactOnOverflow(CompactionStrategy... strategies) {
    for (CompactionStrategy strategy : strategies) {
      if (strategy == null
          || strategy == CompactionStrategy.COMPACTION_STRATEGY_UNSPECIFIED
          || strategy == CompactionStrategy.UNRECOGNIZED) {
        throw new IllegalArgumentException(
            "a compaction strategy is TOOL_RESULTS, REASONING or SUMMARIZE, not " + strategy);
      }
    }
    return OverflowPolicy.newBuilder()
        .setAction(OverflowAction.OVERFLOW_ACTION_COMPACT)
        .addAllStrategies(Arrays.asList(strategies))
        .build();
  }

  /** The request's {@code on_overflow} that fails a conversation that does not fit with CONTEXT_OVERFLOW. */
  public static OverflowPolicy failOnOverflow() {
    return OverflowPolicy.newBuilder().setAction(OverflowAction.OVERFLOW_ACTION_FAIL).build();
  }

  /**
   * The request's {@code provider_options_json}: {@code {"<wire format>": {...}}}, merged into that
   * format's upstream body, as compact JSON (maps, lists, strings, numbers, booleans, null).
   */
  public static String providerOptions(Map<String, ?> options) {
    return Json.write(options);
  }
}
