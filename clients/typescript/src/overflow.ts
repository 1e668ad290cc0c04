/**
 * A conversation that does not fit the model's window: the request's `onOverflow`, and the
 * compacted history a reply carries.
 *
 *   compactOnOverflow("tool_results", "summarize")   onOverflow: compact, trying the strategies in order
 *                                                    (none: the model's configured order)
 *   failOnOverflow()                                 onOverflow: fail with CONTEXT_OVERFLOW
 *   compacted(messages, reply)                       the conversation to go on with: the reply's
 *                                                    compacted messages when the sidecar compacted
 *
 *   const reply = await sidecar.callModel({ model, messages, onOverflow: compactOnOverflow() });
 *   messages = [...compacted(messages, reply), assistant(reply)];
 */
import { create } from "@bufbuild/protobuf";
import {
  CompactionStrategy,
  OverflowAction,
  OverflowPolicySchema,
  type CallModelResponse,
  type Message,
  type OverflowPolicy,
} from "./gen/sidecar/v1/sidecar_pb.js";

/** A compaction strategy, by its enum value or its name. */
export type Strategy = CompactionStrategy | "tool_results" | "reasoning" | "summarize";

const STRATEGIES: Record<string, CompactionStrategy> = {
  tool_results: CompactionStrategy.TOOL_RESULTS,
  reasoning: CompactionStrategy.REASONING,
  summarize: CompactionStrategy.SUMMARIZE,
};

function strategy(s: Strategy): CompactionStrategy {
  if (typeof s === "number") {
    if (s === CompactionStrategy.UNSPECIFIED || CompactionStrategy[s] === undefined) {
      throw new Error(`sidecar: a compaction strategy is TOOL_RESULTS, REASONING or SUMMARIZE, not ${s}`);
    }
    return s;
  }
  if (!Object.hasOwn(STRATEGIES, s)) {
    throw new Error(`sidecar: a compaction strategy is ${Object.keys(STRATEGIES).join(", ")}, not ${JSON.stringify(s)}`);
  }
  return STRATEGIES[s];
}

/**
 * A request's `onOverflow` that compacts a conversation that does not fit and tries again, trying the
 * strategies in the order given (none: the model's configured order); the call fails with
 * CONTEXT_OVERFLOW only when even the compacted conversation does not fit.
 */
export function compactOnOverflow(...strategies: Strategy[]): OverflowPolicy {
  return create(OverflowPolicySchema, { action: OverflowAction.COMPACT, strategies: strategies.map(strategy) });
}

/** A request's `onOverflow` that fails a conversation that does not fit with CONTEXT_OVERFLOW. */
export function failOnOverflow(): OverflowPolicy {
  return create(OverflowPolicySchema, { action: OverflowAction.FAIL });
}

/**
 * The conversation to go on with: the reply's compacted messages when the sidecar compacted the
 * conversation to fit (`reply.compaction`), else `messages`; a new array either way. Append
 * `assistant(reply)` to it.
 */
export function compacted(messages: readonly Message[], reply: CallModelResponse): Message[] {
  return reply.compaction ? [...reply.compaction.messages] : [...messages];
}
