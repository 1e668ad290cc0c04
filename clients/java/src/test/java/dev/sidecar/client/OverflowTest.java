package dev.sidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;
import dev.sidecar.v1.CallModelRequest;
import dev.sidecar.v1.CallModelResponse;
import dev.sidecar.v1.Compaction;
import dev.sidecar.v1.CompactionStep;
import dev.sidecar.v1.CompactionStrategy;
import dev.sidecar.v1.CompactionTrigger;
import dev.sidecar.v1.Hop;
import dev.sidecar.v1.Message;
import dev.sidecar.v1.OverflowAction;
import dev.sidecar.v1.Role;

/** Requests.compactOnOverflow / failOnOverflow and Messages.compacted: the request's on_overflow, the reply's compaction. */
class OverflowTest {
  @Test
  void compactKeepsTheStrategiesInOrder() {
    var policy =
        Requests.compactOnOverflow(
            CompactionStrategy.COMPACTION_STRATEGY_SUMMARIZE, CompactionStrategy.COMPACTION_STRATEGY_TOOL_RESULTS);
    assertEquals(OverflowAction.OVERFLOW_ACTION_COMPACT, policy.getAction());
    assertEquals(
        List.of(CompactionStrategy.COMPACTION_STRATEGY_SUMMARIZE, CompactionStrategy.COMPACTION_STRATEGY_TOOL_RESULTS),
        policy.getStrategiesList());
    assertEquals(0, Requests.compactOnOverflow().getStrategiesCount());
    assertEquals(OverflowAction.OVERFLOW_ACTION_FAIL, Requests.failOnOverflow().getAction());
  }

  @Test
  void anUnspecifiedStrategyIsRefused() {
    var error =
        assertThrows(
            IllegalArgumentException.class,
            () -> Requests.compactOnOverflow(CompactionStrategy.COMPACTION_STRATEGY_UNSPECIFIED));
    assertTrue(error.getMessage().contains("TOOL_RESULTS, REASONING or SUMMARIZE"), error.getMessage());
  }

  @Test
  void theFieldsCrossTheWire() throws Exception {
    var request =
        CallModelRequest.newBuilder()
            .setModel("m")
            .setOnOverflow(Requests.compactOnOverflow(CompactionStrategy.COMPACTION_STRATEGY_REASONING))
            .build();
    assertEquals(request, CallModelRequest.parseFrom(request.toByteArray()));
    var reply =
        CallModelResponse.newBuilder()
            .setCompaction(
                Compaction.newBuilder()
                    .setTrigger(CompactionTrigger.COMPACTION_TRIGGER_PROVIDER)
                    .setTokensBefore(900)
                    .setTokensAfter(300)
                    .addSteps(
                        CompactionStep.newBuilder()
                            .setStrategy(CompactionStrategy.COMPACTION_STRATEGY_TOOL_RESULTS)
                            .addTurns(2)
                            .setTokensBefore(900)
                            .setTokensAfter(300))
                    .addMessages(Message.newBuilder().setRole(Role.ROLE_USER).setText("compacted"))
                    .setSummarizerCalls(1))
            .addHops(Hop.newBuilder().setDeployment("slow-a").setAttempts(1).setCancelled(true))
            .addHops(Hop.newBuilder().setDeployment("fast-b").setAttempts(1).setReason("served").setHedge(true))
            .build();
    var read = CallModelResponse.parseFrom(reply.toByteArray());
    assertEquals(CompactionTrigger.COMPACTION_TRIGGER_PROVIDER, read.getCompaction().getTrigger());
    assertEquals(List.of(2), read.getCompaction().getSteps(0).getTurnsList());
    assertEquals(1, read.getCompaction().getSummarizerCalls());
    assertTrue(read.getHops(0).getCancelled());
    assertFalse(read.getHops(0).getHedge());
    assertTrue(read.getHops(1).getHedge());
    assertFalse(read.getHops(1).getCancelled());
  }

  @Test
  void compactedAdoptsTheRepliesMessagesOrKeepsTheCallers() {
    List<Message> history = List.of(Messages.user("hi").build());
    var plain = CallModelResponse.newBuilder().setMessage(Message.newBuilder().setText("hello")).build();
    List<Message> kept = Messages.compacted(history, plain);
    assertEquals(history, kept);
    assertNotSame(history, kept);
    kept.add(Messages.assistant(plain)); // a mutable list of its own
    var shorter =
        CallModelResponse.newBuilder()
            .setCompaction(Compaction.newBuilder().addMessages(Message.newBuilder().setText("shorter")))
            .build();
    assertEquals("shorter", Messages.compacted(history, shorter).get(0).getText());
  }
}
