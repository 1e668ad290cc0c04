package sidecar

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

// waitForServer bounds how long a test waits for the fake to see a cancellation.
const waitForServer = 5 * time.Second

func textEvent(text string) *sidecarv1.StreamModelEvent {
	return &sidecarv1.StreamModelEvent{Event: &sidecarv1.StreamModelEvent_Text{Text: &sidecarv1.TextDelta{Text: text}}}
}

func toolEvent(d *sidecarv1.ToolCallDelta) *sidecarv1.StreamModelEvent {
	return &sidecarv1.StreamModelEvent{Event: &sidecarv1.StreamModelEvent_ToolCall{ToolCall: d}}
}

func finalEvent(r *sidecarv1.CallModelResponse) *sidecarv1.StreamModelEvent {
	return &sidecarv1.StreamModelEvent{Event: &sidecarv1.StreamModelEvent_Final{Final: r}}
}

func reply(text string) *sidecarv1.CallModelResponse {
	return &sidecarv1.CallModelResponse{Message: &sidecarv1.Message{Role: sidecarv1.Role_ROLE_ASSISTANT, Text: text}}
}

func interruptedFailure() *sidecarv1.Failure {
	msg := "The stream of fast was cut after 2 deltas: connection dropped."
	return &sidecarv1.Failure{
		Kind: sidecarv1.FailureKind_FAILURE_KIND_STREAM_INTERRUPTED, Message: msg, Explanation: Explain(msg, false), Attempts: 1,
		Detail: &sidecarv1.Failure_Stream{Stream: &sidecarv1.StreamDetail{PartialText: "Hello, wo", Reason: "connection dropped", DeltasSent: 2}},
		Hops: []*sidecarv1.Hop{
			{Deployment: "fast-a", Kind: sidecarv1.FailureKind_FAILURE_KIND_CIRCUIT_OPEN, Reason: "circuit open", Skipped: true},
			{Deployment: "fast-b", Kind: sidecarv1.FailureKind_FAILURE_KIND_STREAM_INTERRUPTED, Attempts: 1, Reason: "cut"},
		},
	}
}

// StreamModel answers by model id, one scripted wire sequence each.
func (f *fakeSidecar) StreamModel(req *sidecarv1.CallModelRequest, stream grpc.ServerStreamingServer[sidecarv1.StreamModelEvent]) error {
	send := func(events ...*sidecarv1.StreamModelEvent) error {
		for _, e := range events {
			if err := stream.Send(e); err != nil {
				return err
			}
		}
		return nil
	}
	switch req.GetModel() {
	case "deltas":
		final := reply("Hello")
		final.ServedBy = "fast-b"
		final.Hops = []*sidecarv1.Hop{{Deployment: "fast-a", Kind: sidecarv1.FailureKind_FAILURE_KIND_CIRCUIT_OPEN, Skipped: true}, {Deployment: "fast-b", Attempts: 1, Reason: "served"}}
		return send(textEvent("Hel"), textEvent("lo"),
			toolEvent(&sidecarv1.ToolCallDelta{Index: 0, Id: "call_1", Name: "search", ArgumentsFragment: `{"q":`}),
			toolEvent(&sidecarv1.ToolCallDelta{Index: 1, Id: "call_2", Name: "fetch", ArgumentsFragment: `{}`}),
			toolEvent(&sidecarv1.ToolCallDelta{Index: 0, ArgumentsFragment: `"x"}`}),
			finalEvent(final))
	case "restart":
		restart := &sidecarv1.StreamModelEvent{Event: &sidecarv1.StreamModelEvent_Restart{Restart: &sidecarv1.StreamRestart{
			Cause: sidecarv1.RestartCause_RESTART_CAUSE_UPSTREAM_FAULT, Reason: "connection dropped", Attempt: 2,
		}}}
		return send(textEvent("Hel"), toolEvent(&sidecarv1.ToolCallDelta{Id: "call_0", Name: "old"}), restart,
			textEvent("Good"), textEvent("bye"), finalEvent(reply("Goodbye")))
	case "interrupted", "quota":
		if err := send(textEvent("Hello, "), textEvent("wo")); err != nil {
			return err
		}
		if req.GetModel() == "quota" {
			return failureStatus(f.t, quotaFailure()).Err()
		}
		return failureStatus(f.t, interruptedFailure()).Err()
	case "reasoning":
		thinking := func(d *sidecarv1.ReasoningDelta) *sidecarv1.StreamModelEvent {
			return &sidecarv1.StreamModelEvent{Event: &sidecarv1.StreamModelEvent_Reasoning{Reasoning: d}}
		}
		restart := &sidecarv1.StreamModelEvent{Event: &sidecarv1.StreamModelEvent_Restart{Restart: &sidecarv1.StreamRestart{Attempt: 2}}}
		final := reply("Hi")
		final.Message.Reasoning = []*sidecarv1.ReasoningPart{{Text: "Let me think.", Signature: "sig-0", Format: "anthropic"}}
		return send(thinking(&sidecarv1.ReasoningDelta{Text: "void"}), restart,
			thinking(&sidecarv1.ReasoningDelta{Text: "Let me "}), thinking(&sidecarv1.ReasoningDelta{Text: "think."}),
			thinking(&sidecarv1.ReasoningDelta{Signature: "sig-0"}), thinking(&sidecarv1.ReasoningDelta{Index: 1, RedactedData: "opaque"}),
			textEvent("Hi"), finalEvent(final))
	case "no-final":
		return send(textEvent("Hel"))
	case "slow":
		if err := send(textEvent("Hel")); err != nil {
			return err
		}
		f.streamStarted <- struct{}{}
		<-stream.Context().Done()
		f.streamCancelled <- struct{}{}
		return stream.Context().Err()
	}
	return failureStatus(f.t, &sidecarv1.Failure{Kind: sidecarv1.FailureKind_FAILURE_KIND_MODEL_NOT_FOUND, Message: "no " + req.GetModel()}).Err()
}

func startStream(t *testing.T, c *Client, ctx context.Context, model string) *ModelStream {
	t.Helper()
	s, err := c.StreamModel(ctx, &sidecarv1.CallModelRequest{Model: model})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Cancel)
	return s
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitForServer):
		t.Fatalf("the fake sidecar never saw %s", what)
	}
}

func TestAStreamDeliversItsDeltasThenTheFinalReply(t *testing.T) {
	c, _ := serve(t, "tcp", "127.0.0.1:0")
	s := startStream(t, c, ctxFor(t), "deltas")
	var texts []string
	events := 0
	for {
		event, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		events++
		if d := event.GetText(); d != nil {
			texts = append(texts, d.GetText())
		}
	}
	if events != 6 || len(texts) != 2 || s.Text() != "Hello" {
		t.Errorf("events %d, texts %q, Text %q", events, texts, s.Text())
	}
	calls := s.ToolCalls()
	if len(calls) != 2 || calls[0].GetId() != "call_1" || calls[0].GetName() != "search" || calls[0].GetArgumentsJson() != `{"q":"x"}` || calls[1].GetName() != "fetch" {
		t.Errorf("tool calls = %v", calls)
	}
	final := s.Final()
	if final.GetMessage().GetText() != "Hello" || final.GetServedBy() != "fast-b" || len(final.GetHops()) != 2 || !final.GetHops()[0].GetSkipped() {
		t.Errorf("final = %v", final)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("Recv after the end = %v, want io.EOF again", err)
	}
}

func TestCollectReturnsTheFinalReply(t *testing.T) {
	c, _ := serve(t, "tcp", "127.0.0.1:0")
	s := startStream(t, c, ctxFor(t), "deltas")
	r, err := s.Collect()
	if err != nil || r.GetMessage().GetText() != "Hello" || r.GetServedBy() != "fast-b" || s.Text() != "Hello" {
		t.Fatalf("Collect = %v, %v (Text %q)", r, err, s.Text())
	}
}

func TestARestartVoidsWhatCameBeforeIt(t *testing.T) {
	c, _ := serve(t, "tcp", "127.0.0.1:0")
	s := startStream(t, c, ctxFor(t), "restart")
	var kinds []string
	for event, err := range s.Events() {
		if err != nil {
			t.Fatal(err)
		}
		if r := event.GetRestart(); r != nil {
			if r.GetCause() != sidecarv1.RestartCause_RESTART_CAUSE_UPSTREAM_FAULT || r.GetAttempt() != 2 {
				t.Errorf("restart = %v", r)
			}
			if s.Text() != "" || len(s.ToolCalls()) != 0 {
				t.Errorf("after the restart: Text %q, ToolCalls %v", s.Text(), s.ToolCalls())
			}
		}
		kinds = append(kinds, string(event.ProtoReflect().WhichOneof(event.ProtoReflect().Descriptor().Oneofs().ByName("event")).Name()))
	}
	want := []string{"text", "tool_call", "restart", "text", "text", "final"}
	if len(kinds) != len(want) {
		t.Fatalf("events = %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("events = %v, want %v", kinds, want)
		}
	}
	if s.Text() != "Goodbye" || s.Restarts() != 1 || s.Final().GetMessage().GetText() != "Goodbye" {
		t.Errorf("Text %q, Restarts %d, Final %v", s.Text(), s.Restarts(), s.Final())
	}
}

func TestAStreamFailureIsTheErrorCallModelReturns(t *testing.T) {
	c, _ := serve(t, "tcp", "127.0.0.1:0")
	_, unary := c.CallModel(ctxFor(t), &sidecarv1.CallModelRequest{Model: "quota"})
	s := startStream(t, c, ctxFor(t), "quota")
	var texts []string
	var streamed error
	for event, err := range s.Events() {
		if err != nil {
			if event != nil {
				t.Errorf("a failure comes with a nil event, got %v", event)
			}
			streamed = err
			break
		}
		texts = append(texts, event.GetText().GetText())
	}
	var a, b *Error
	if !errors.As(unary, &a) || !errors.As(streamed, &b) {
		t.Fatalf("errors = %v / %v, want *Error both", unary, streamed)
	}
	if b.Kind != sidecarv1.FailureKind_FAILURE_KIND_QUOTA_EXHAUSTED || b.GRPCCode != codes.ResourceExhausted || b.RetryAfter != 7*time.Second || b.HTTP.GetStatusCode() != 429 {
		t.Errorf("streamed failure = %+v", b)
	}
	if b.Kind != a.Kind || b.GRPCCode != a.GRPCCode || b.RetryAfter != a.RetryAfter || !proto.Equal(a.Failure, b.Failure) || b.Reason != a.Reason {
		t.Errorf("stream %+v differs from CallModel %+v", b, a)
	}
	if len(texts) != 2 || s.Text() != "Hello, wo" {
		t.Errorf("texts before the failure = %q (Text %q)", texts, s.Text())
	}
	if _, err := s.Collect(); err != streamed {
		t.Errorf("Collect after the failure = %v, want the same error", err)
	}
}

func TestStreamInterruptedCarriesItsDetailAndHops(t *testing.T) {
	c, _ := serve(t, "tcp", "127.0.0.1:0")
	s := startStream(t, c, ctxFor(t), "interrupted")
	_, err := s.Collect()
	var failure *Error
	if !errors.As(err, &failure) {
		t.Fatalf("err = %v", err)
	}
	if failure.Kind != sidecarv1.FailureKind_FAILURE_KIND_STREAM_INTERRUPTED || failure.Correctable || failure.GRPCCode != codes.Aborted || failure.KindName() != "STREAM_INTERRUPTED" {
		t.Errorf("kind/correctable/code = %v %v %v", failure.Kind, failure.Correctable, failure.GRPCCode)
	}
	d := failure.StreamDetail()
	if d.GetPartialText() != "Hello, wo" || d.GetReason() != "connection dropped" || d.GetDeltasSent() != 2 || d != failure.Detail {
		t.Errorf("stream detail = %v (Detail %v)", d, failure.Detail)
	}
	if len(failure.Hops) != 2 || failure.Hops[0].GetDeployment() != "fast-a" || !failure.Hops[0].GetSkipped() || failure.Hops[1].GetKind() != sidecarv1.FailureKind_FAILURE_KIND_STREAM_INTERRUPTED {
		t.Errorf("hops = %v", failure.Hops)
	}
	if s.Text() != d.GetPartialText() {
		t.Errorf("Text %q", s.Text())
	}
}

func TestCollectWithoutAFinalEventIsASystemFailure(t *testing.T) {
	c, _ := serve(t, "tcp", "127.0.0.1:0")
	_, err := startStream(t, c, ctxFor(t), "no-final").Collect()
	var failure *Error
	if !errors.As(err, &failure) || failure.Kind != sidecarv1.FailureKind_FAILURE_KIND_SYSTEM || failure.Message != NoFinalMessage {
		t.Fatalf("err = %v", err)
	}
}

func TestBreakingOutOfEventsCancelsTheRPC(t *testing.T) {
	c, fake := serve(t, "tcp", "127.0.0.1:0")
	s := startStream(t, c, ctxFor(t), "slow")
	for event, err := range s.Events() {
		if err != nil || event.GetText().GetText() != "Hel" {
			t.Fatalf("first event = %v, %v", event, err)
		}
		break
	}
	waitFor(t, fake.streamCancelled, "the cancellation")
	if _, err := s.Recv(); !errors.Is(err, context.Canceled) {
		t.Errorf("Recv after the break = %v, want one matching context.Canceled", err)
	}
}

func TestCancellingTheContextCancelsTheStream(t *testing.T) {
	c, fake := serve(t, "tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startStream(t, c, ctx, "slow")
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, fake.streamStarted, "the first delta sent")
	cancel()
	_, err := s.Recv()
	if !errors.Is(err, context.Canceled) || FromError(err).GRPCCode != codes.Canceled || FromError(err).Kind != sidecarv1.FailureKind_FAILURE_KIND_JOB_CANCELLED {
		t.Fatalf("err = %v, want a JOB_CANCELLED *Error matching context.Canceled", err)
	}
	waitFor(t, fake.streamCancelled, "the cancellation")
}

func TestAStreamAssemblesReasoningSinceTheLastRestart(t *testing.T) {
	c, _ := serve(t, "tcp", "127.0.0.1:0")
	s := startStream(t, c, ctxFor(t), "reasoning")
	final, err := s.Collect()
	if err != nil {
		t.Fatal(err)
	}
	want := []*sidecarv1.ReasoningPart{{Text: "Let me think.", Signature: "sig-0"}, {RedactedData: "opaque"}}
	got := s.Reasoning()
	if len(got) != len(want) || !proto.Equal(got[0], want[0]) || !proto.Equal(got[1], want[1]) {
		t.Errorf("Reasoning() = %v, want %v", got, want)
	}
	next := Assistant(final.GetMessage())
	if !proto.Equal(next.GetReasoning()[0], final.GetMessage().GetReasoning()[0]) || next.GetReasoning()[0].GetFormat() != "anthropic" {
		t.Errorf("Assistant(final) reasoning = %v", next.GetReasoning())
	}
}
