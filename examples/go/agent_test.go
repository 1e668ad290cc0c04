package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sidecar "github.com/sidecar-dev/sidecar/clients/go"
	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

var notFound = "No document 'doc-404' exists.\n" + sidecar.CorrectableLine

var answer = "answer after call_7 is_error=true: " + notFound

// scriptedSidecar asks for one tool call, then answers with what the tool said;
// model "interrupted" breaks off its streamed answer with STREAM_INTERRUPTED.
type scriptedSidecar struct {
	sidecarv1.UnimplementedSidecarServer
}

const interrupted = "The stream from model interrupted broke off after 1 deltas had been sent: connection dropped."

func (scriptedSidecar) ListTools(context.Context, *sidecarv1.ListToolsRequest) (*sidecarv1.ListToolsResponse, error) {
	return &sidecarv1.ListToolsResponse{Tools: []*sidecarv1.ToolInfo{{Definition: &sidecarv1.ToolDefinition{Name: "fetch_doc"}}}}, nil
}

func (scriptedSidecar) ListModels(context.Context, *sidecarv1.ListModelsRequest) (*sidecarv1.ListModelsResponse, error) {
	return &sidecarv1.ListModelsResponse{Models: []*sidecarv1.ModelInfo{{Id: "scripted"}}}, nil
}

// answerTo is what the scripted model answers once a tool result is in: what the tool said, quoted.
func answerTo(req *sidecarv1.CallModelRequest) (string, bool) {
	last := req.GetMessages()[len(req.GetMessages())-1]
	if last.GetRole() != sidecarv1.Role_ROLE_TOOL {
		return "", false
	}
	r := last.GetToolResults()[0]
	return "answer after " + r.GetCallId() + " is_error=" + map[bool]string{true: "true", false: "false"}[r.GetIsError()] + ": " + r.GetContent(), true
}

func toolCallReply(text string) *sidecarv1.CallModelResponse {
	return &sidecarv1.CallModelResponse{Message: &sidecarv1.Message{
		Role: sidecarv1.Role_ROLE_ASSISTANT, Text: text,
		ToolCalls: []*sidecarv1.ToolCall{{Id: "call_7", Name: "fetch_doc", ArgumentsJson: `{"doc_id":"doc-404"}`}},
	}}
}

func (scriptedSidecar) CallModel(_ context.Context, req *sidecarv1.CallModelRequest) (*sidecarv1.CallModelResponse, error) {
	if text, ok := answerTo(req); ok {
		return &sidecarv1.CallModelResponse{Message: &sidecarv1.Message{Role: sidecarv1.Role_ROLE_ASSISTANT, Text: text}}, nil
	}
	return toolCallReply(""), nil
}

func textEvent(text string) *sidecarv1.StreamModelEvent {
	return &sidecarv1.StreamModelEvent{Event: &sidecarv1.StreamModelEvent_Text{Text: &sidecarv1.TextDelta{Text: text}}}
}

// StreamModel: a false start, restarted, then the tool call in two fragments; then the answer in two halves.
func (scriptedSidecar) StreamModel(req *sidecarv1.CallModelRequest, stream grpc.ServerStreamingServer[sidecarv1.StreamModelEvent]) error {
	var events []*sidecarv1.StreamModelEvent
	text, ok := answerTo(req)
	switch {
	case !ok:
		restart := &sidecarv1.StreamRestart{Cause: sidecarv1.RestartCause_RESTART_CAUSE_UPSTREAM_FAULT, Reason: "connection dropped", Attempt: 2}
		events = []*sidecarv1.StreamModelEvent{
			textEvent("Let me "),
			{Event: &sidecarv1.StreamModelEvent_Restart{Restart: restart}},
			textEvent("Looking it up."),
			{Event: &sidecarv1.StreamModelEvent_ToolCall{ToolCall: &sidecarv1.ToolCallDelta{Id: "call_7", Name: "fetch_doc", ArgumentsFragment: `{"doc_id":`}}},
			{Event: &sidecarv1.StreamModelEvent_ToolCall{ToolCall: &sidecarv1.ToolCallDelta{ArgumentsFragment: `"doc-404"}`}}},
			{Event: &sidecarv1.StreamModelEvent_Final{Final: toolCallReply("Looking it up.")}},
		}
	case req.GetModel() == "interrupted":
		if err := stream.Send(textEvent(text[:10])); err != nil {
			return err
		}
		failure := &sidecarv1.Failure{
			Kind: sidecarv1.FailureKind_FAILURE_KIND_STREAM_INTERRUPTED, Message: interrupted,
			Explanation: sidecar.Explain(interrupted, false), Attempts: 1,
			Detail: &sidecarv1.Failure_Stream{Stream: &sidecarv1.StreamDetail{PartialText: text[:10], Reason: "connection dropped", DeltasSent: 1}},
		}
		st, err := status.New(codes.Aborted, interrupted).WithDetails(failure)
		if err != nil {
			return err
		}
		return st.Err()
	default:
		half := len(text) / 2
		final := &sidecarv1.CallModelResponse{Message: &sidecarv1.Message{Role: sidecarv1.Role_ROLE_ASSISTANT, Text: text}}
		events = []*sidecarv1.StreamModelEvent{textEvent(text[:half]), textEvent(text[half:]), {Event: &sidecarv1.StreamModelEvent_Final{Final: final}}}
	}
	for _, e := range events {
		if err := stream.Send(e); err != nil {
			return err
		}
	}
	return nil
}

func (scriptedSidecar) ExecuteTool(_ context.Context, req *sidecarv1.ExecuteToolRequest) (*sidecarv1.ExecuteToolResponse, error) {
	return &sidecarv1.ExecuteToolResponse{
		Outcome: &sidecarv1.ExecuteToolResponse_Failure{Failure: &sidecarv1.Failure{
			Kind: sidecarv1.FailureKind_FAILURE_KIND_RESOURCE_NOT_FOUND, Correctable: true, Explanation: notFound,
		}},
		ModelText: notFound, CallId: req.GetCallId(),
	}, nil
}

// scripted serves scriptedSidecar on loopback; the client is closed, the server stopped, at the end.
func scripted(t *testing.T) *sidecar.Client {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	sidecarv1.RegisterSidecarServer(srv, scriptedSidecar{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	c, err := sidecar.Dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// screen is what a terminal keeps of each streamed reply: its text since its last restart.
type screen struct {
	replies, restarts []string
	current           strings.Builder
}

func (s *screen) show(event *sidecarv1.StreamModelEvent) {
	switch e := event.GetEvent().(type) {
	case *sidecarv1.StreamModelEvent_Text:
		s.current.WriteString(e.Text.GetText())
	case *sidecarv1.StreamModelEvent_Restart:
		s.restarts = append(s.restarts, e.Restart.GetReason())
		s.current.Reset()
	case *sidecarv1.StreamModelEvent_Final:
		s.replies = append(s.replies, s.current.String())
		s.current.Reset()
	}
}

func TestTheLoopHandsAToolFailureBackToTheModel(t *testing.T) {
	c := scripted(t)
	var trace bytes.Buffer
	got, err := RunAgent(context.Background(), c, "", "read doc-404", 4, &trace, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != answer {
		t.Errorf("answer = %q", got)
	}
	if trace.String() != "turn 1: fetch_doc -> failure RESOURCE_NOT_FOUND\n" {
		t.Errorf("trace = %q", trace.String())
	}
}

func TestTheStreamedLoopShowsEachEventAndVoidsWhatARestartVoids(t *testing.T) {
	c := scripted(t)
	var trace bytes.Buffer
	var s screen
	got, err := RunAgent(context.Background(), c, "", "read doc-404", 4, &trace, s.show)
	if err != nil {
		t.Fatal(err)
	}
	if got != answer {
		t.Errorf("answer = %q", got)
	}
	if trace.String() != "turn 1: fetch_doc -> failure RESOURCE_NOT_FOUND\n" {
		t.Errorf("trace = %q", trace.String())
	}
	if strings.Join(s.restarts, "|") != "connection dropped" {
		t.Errorf("restarts = %q", s.restarts)
	}
	if len(s.replies) != 2 || s.replies[0] != "Looking it up." || s.replies[1] != answer {
		t.Errorf("replies = %q", s.replies)
	}
}

func TestPrintEventsPrintsDeltasAsTheyComeAndMarksARestart(t *testing.T) {
	c := scripted(t)
	var out, trace bytes.Buffer
	if _, err := RunAgent(context.Background(), c, "", "read doc-404", 4, &trace, PrintEvents(&out)); err != nil {
		t.Fatal(err)
	}
	want := "Let me \n--- restarted (connection dropped): discard the text above ---\nLooking it up.\n" + answer + "\n"
	if out.String() != want {
		t.Errorf("printed %q\nwant    %q", out.String(), want)
	}
}

func TestAStreamsFailureEndsTheLoopWithItsKindAsCallModelsWould(t *testing.T) {
	c := scripted(t)
	var trace bytes.Buffer
	var s screen
	_, err := RunAgent(context.Background(), c, "interrupted", "read doc-404", 4, &trace, s.show)
	if err == nil || !strings.Contains(err.Error(), "turn 2: the model call failed (STREAM_INTERRUPTED, correctable=false): "+interrupted) {
		t.Fatalf("err = %v", err)
	}
	if s.current.String() != answer[:10] { // what the stream had sent; no final came to void it
		t.Errorf("the screen holds %q", s.current.String())
	}
}

// TestTheLoopAgainstARealSidecar runs the example against $SIDECAR_ADDR (make
// clients-examples starts one), with CallModel and streamed; skipped without it.
func TestTheLoopAgainstARealSidecar(t *testing.T) {
	addr := os.Getenv("SIDECAR_ADDR")
	if addr == "" {
		t.Skip("SIDECAR_ADDR is not set")
	}
	for _, streamed := range []bool{false, true} {
		t.Run(map[bool]string{false: "CallModel", true: "StreamModel"}[streamed], func(t *testing.T) {
			c, err := sidecar.Dial(addr)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var trace bytes.Buffer
			var s screen
			var show ShowEvent
			if streamed {
				show = s.show
			}
			got, err := RunAgent(ctx, c, os.Getenv("SIDECAR_MODEL"), "Find what the documentation says about retries.", 6, &trace, show)
			if err != nil {
				t.Fatalf("%v\ntrace:\n%s", err, trace.String())
			}
			if got == "" || !strings.HasPrefix(trace.String(), "turn 1: ") {
				t.Errorf("answer %q after trace:\n%s", got, trace.String())
			}
			if streamed && (len(s.replies) < 2 || s.replies[len(s.replies)-1] != got) {
				t.Errorf("the streamed replies %q do not end with the answer %q", s.replies, got)
			}
			t.Logf("trace:\n%sanswer: %s", trace.String(), got)
		})
	}
}
