import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  CallModelRequestSchema,
  CallModelResponseSchema,
  CompactionStrategy,
  CompactionTrigger,
  OverflowAction,
  Role,
  compactOnOverflow,
  compacted,
  failOnOverflow,
  user,
} from "../src/index.js";

describe("onOverflow", () => {
  it("compacts with the strategies in the order given, by name or enum", () => {
    const policy = compactOnOverflow("summarize", CompactionStrategy.TOOL_RESULTS);
    assert.equal(policy.action, OverflowAction.COMPACT);
    assert.deepEqual(policy.strategies, [CompactionStrategy.SUMMARIZE, CompactionStrategy.TOOL_RESULTS]);
    assert.deepEqual(compactOnOverflow().strategies, []);
    assert.equal(failOnOverflow().action, OverflowAction.FAIL);
  });

  it("refuses a strategy it does not know, naming it", () => {
    assert.throws(() => compactOnOverflow("drop" as "reasoning"), /compaction strategy is tool_results, reasoning, summarize, not "drop"/);
    assert.throws(() => compactOnOverflow(CompactionStrategy.UNSPECIFIED), /not 0/);
  });

  it("crosses the wire in the request, and the compaction and hedged hops in the reply", () => {
    const request = create(CallModelRequestSchema, { model: "m", onOverflow: compactOnOverflow("reasoning") });
    const back = fromBinary(CallModelRequestSchema, toBinary(CallModelRequestSchema, request));
    assert.deepEqual(back.onOverflow?.strategies, [CompactionStrategy.REASONING]);
    const reply = create(CallModelResponseSchema, {
      compaction: {
        trigger: CompactionTrigger.PROVIDER,
        tokensBefore: 900,
        tokensAfter: 300,
        steps: [{ strategy: CompactionStrategy.TOOL_RESULTS, turns: [2], tokensBefore: 900, tokensAfter: 300 }],
        messages: [{ role: Role.USER, text: "compacted" }],
        summarizerCalls: 1,
      },
      hops: [
        { deployment: "slow-a", attempts: 1, cancelled: true },
        { deployment: "fast-b", attempts: 1, reason: "served", hedge: true },
      ],
    });
    const read = fromBinary(CallModelResponseSchema, toBinary(CallModelResponseSchema, reply));
    assert.equal(read.compaction?.trigger, CompactionTrigger.PROVIDER);
    assert.deepEqual([read.compaction?.tokensBefore, read.compaction?.tokensAfter, read.compaction?.summarizerCalls], [900, 300, 1]);
    assert.deepEqual(read.compaction?.steps[0].turns, [2]);
    assert.deepEqual(read.hops.map((h) => [h.deployment, h.hedge, h.cancelled]), [["slow-a", false, true], ["fast-b", true, false]]);
  });
});

describe("compacted", () => {
  it("adopts the reply's compacted messages, or keeps the caller's in a new array", () => {
    const history = [user("hi")];
    const plain = create(CallModelResponseSchema, { message: { role: Role.ASSISTANT, text: "hello" } });
    const kept = compacted(history, plain);
    assert.deepEqual(kept, history);
    assert.notEqual(kept, history);
    const shorter = create(CallModelResponseSchema, { compaction: { messages: [{ role: Role.USER, text: "shorter" }] } });
    assert.deepEqual(compacted(history, shorter).map((m) => m.text), ["shorter"]);
  });
});
