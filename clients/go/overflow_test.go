package sidecar

import (
	"testing"

	"google.golang.org/protobuf/proto"

	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

func TestCompactOnOverflowKeepsTheStrategiesInOrder(t *testing.T) {
	got := CompactOnOverflow(sidecarv1.CompactionStrategy_COMPACTION_STRATEGY_SUMMARIZE,
		sidecarv1.CompactionStrategy_COMPACTION_STRATEGY_TOOL_RESULTS)
	want := &sidecarv1.OverflowPolicy{
		Action: sidecarv1.OverflowAction_OVERFLOW_ACTION_COMPACT,
		Strategies: []sidecarv1.CompactionStrategy{
			sidecarv1.CompactionStrategy_COMPACTION_STRATEGY_SUMMARIZE,
			sidecarv1.CompactionStrategy_COMPACTION_STRATEGY_TOOL_RESULTS,
		},
	}
	if !proto.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if p := CompactOnOverflow(); p.GetAction() != sidecarv1.OverflowAction_OVERFLOW_ACTION_COMPACT || len(p.GetStrategies()) != 0 {
		t.Fatalf("no strategies: want compact in the model's order, got %v", p)
	}
	if p := FailOnOverflow(); p.GetAction() != sidecarv1.OverflowAction_OVERFLOW_ACTION_FAIL {
		t.Fatalf("got %v", p)
	}
}

func TestTheOverflowPolicyAndTheCompactionCrossTheWire(t *testing.T) {
	req := &sidecarv1.CallModelRequest{Model: "m", OnOverflow: CompactOnOverflow(sidecarv1.CompactionStrategy_COMPACTION_STRATEGY_REASONING)}
	reply := &sidecarv1.CallModelResponse{
		Compaction: &sidecarv1.Compaction{
			Trigger:      sidecarv1.CompactionTrigger_COMPACTION_TRIGGER_PROVIDER,
			TokensBefore: 900,
			TokensAfter:  300,
			Steps: []*sidecarv1.CompactionStep{{
				Strategy: sidecarv1.CompactionStrategy_COMPACTION_STRATEGY_TOOL_RESULTS, Turns: []uint32{2}, TokensBefore: 900, TokensAfter: 300,
			}},
			Messages:        []*sidecarv1.Message{{Role: sidecarv1.Role_ROLE_USER, Text: "compacted"}},
			SummarizerCalls: 1,
		},
		Hops: []*sidecarv1.Hop{
			{Deployment: "slow-a", Attempts: 1, Cancelled: true},
			{Deployment: "fast-b", Attempts: 1, Reason: "served", Hedge: true},
		},
	}
	for _, m := range []proto.Message{req, reply} {
		wire, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		back := m.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(wire, back); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(m, back) {
			t.Fatalf("%v came back as %v", m, back)
		}
	}
	hops := reply.GetHops()
	if !hops[0].GetCancelled() || hops[0].GetHedge() || !hops[1].GetHedge() || hops[1].GetCancelled() {
		t.Fatalf("hops: %v", hops)
	}
}

func TestCompactedAdoptsTheRepliesMessagesOrKeepsTheCallers(t *testing.T) {
	history := []*sidecarv1.Message{{Role: sidecarv1.Role_ROLE_USER, Text: "hi"}}
	plain := &sidecarv1.CallModelResponse{Message: &sidecarv1.Message{Role: sidecarv1.Role_ROLE_ASSISTANT, Text: "hello"}}
	kept := Compacted(history, plain)
	if len(kept) != 1 || kept[0] != history[0] {
		t.Fatalf("kept %v", kept)
	}
	kept = append(kept, plain.GetMessage())
	if len(history) != 1 {
		t.Fatal("appending to what Compacted returned changed the caller's slice")
	}
	compacted := &sidecarv1.CallModelResponse{Compaction: &sidecarv1.Compaction{
		Messages: []*sidecarv1.Message{{Role: sidecarv1.Role_ROLE_USER, Text: "shorter"}},
	}}
	if got := Compacted(history, compacted); len(got) != 1 || got[0].GetText() != "shorter" {
		t.Fatalf("got %v", got)
	}
}
