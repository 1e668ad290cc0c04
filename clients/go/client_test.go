package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

// fakeSidecar answers like a sidecar, from canned values.
type fakeSidecar struct {
	sidecarv1.UnimplementedSidecarServer
	t        *testing.T
	deadline chan time.Time
	// streamStarted and streamCancelled say that the "slow" StreamModel sent
	// its first delta, and that it saw the client's cancellation.
	streamStarted   chan struct{}
	streamCancelled chan struct{}
}

func (f *fakeSidecar) ExecuteTool(ctx context.Context, req *sidecarv1.ExecuteToolRequest) (*sidecarv1.ExecuteToolResponse, error) {
	switch req.GetTool() {
	case "get_doc":
		msg := "No document with id 'nope' exists."
		expl := msg + "\n" + CorrectableLine
		return &sidecarv1.ExecuteToolResponse{
			Outcome: &sidecarv1.ExecuteToolResponse_Failure{Failure: &sidecarv1.Failure{
				Kind: sidecarv1.FailureKind_FAILURE_KIND_RESOURCE_NOT_FOUND, Correctable: true,
				Message: msg, Explanation: expl,
				Http: &sidecarv1.HttpDetail{StatusCode: 404, Service: "docs", Endpoint: "http://127.0.0.1/docs/nope"},
			}},
			ModelText: expl, Attempts: 1, CallId: req.GetCallId(),
		}, nil
	case "search":
		return &sidecarv1.ExecuteToolResponse{
			Outcome:   &sidecarv1.ExecuteToolResponse_Result{Result: &sidecarv1.ToolResult{Content: `{"hits":[]}`, StatusCode: 200, Empty: true}},
			ModelText: `{"hits":[]}`, Attempts: 1, CallId: req.GetCallId(),
		}, nil
	}
	return nil, status.Error(codes.InvalidArgument, "unknown tool "+req.GetTool())
}

func (f *fakeSidecar) CallModel(ctx context.Context, req *sidecarv1.CallModelRequest) (*sidecarv1.CallModelResponse, error) {
	switch req.GetModel() {
	case "quota":
		return nil, failureStatus(f.t, quotaFailure()).Err()
	case "deadline":
		d, _ := ctx.Deadline()
		f.deadline <- d
	case "slow":
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return &sidecarv1.CallModelResponse{
		Message:      &sidecarv1.Message{Role: sidecarv1.Role_ROLE_ASSISTANT, Text: "hello"},
		FinishReason: sidecarv1.FinishReason_FINISH_REASON_STOP,
	}, nil
}

func (f *fakeSidecar) ListModels(context.Context, *sidecarv1.ListModelsRequest) (*sidecarv1.ListModelsResponse, error) {
	return &sidecarv1.ListModelsResponse{Models: []*sidecarv1.ModelInfo{{Id: "fast", Provider: "openai"}}}, nil
}

func (f *fakeSidecar) ListTools(context.Context, *sidecarv1.ListToolsRequest) (*sidecarv1.ListToolsResponse, error) {
	return &sidecarv1.ListToolsResponse{Tools: []*sidecarv1.ToolInfo{{Definition: &sidecarv1.ToolDefinition{Name: "search"}}}}, nil
}

// serve starts a fake sidecar on network/address and returns a client of it.
func serve(t *testing.T, network, address string) (*Client, *fakeSidecar) {
	t.Helper()
	lis, err := net.Listen(network, address)
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeSidecar{t: t, deadline: make(chan time.Time, 1), streamStarted: make(chan struct{}, 1), streamCancelled: make(chan struct{}, 1)}
	srv := grpc.NewServer()
	sidecarv1.RegisterSidecarServer(srv, fake)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	target := lis.Addr().String()
	if network == "unix" {
		target = "unix:" + address
	}
	c, err := Dial(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, fake
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestDialReachesAUnixSocket(t *testing.T) {
	c, _ := serve(t, "unix", filepath.Join(t.TempDir(), "sidecar.sock"))
	models, err := c.ListModels(ctxFor(t))
	if err != nil || len(models) != 1 || models[0].GetId() != "fast" {
		t.Fatalf("ListModels = %v, %v", models, err)
	}
}

func TestDialWithNoAddressReadsTheEnvironment(t *testing.T) {
	t.Setenv(AddressEnv, "")
	if _, err := Dial(""); !errors.Is(err, ErrNoAddress) {
		t.Errorf("err = %v", err)
	}
	t.Setenv(AddressEnv, "127.0.0.1:1")
	c, err := Dial("")
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
}

func TestCallModelFailureIsAnErrorRebuiltFromTheTrailer(t *testing.T) {
	c, _ := serve(t, "tcp", "127.0.0.1:0")
	_, err := c.CallModel(ctxFor(t), &sidecarv1.CallModelRequest{Model: "quota"})

	var failure *Error
	if !errors.As(err, &failure) {
		t.Fatalf("err = %#v, want *Error", err)
	}
	if failure.Kind != sidecarv1.FailureKind_FAILURE_KIND_QUOTA_EXHAUSTED || failure.GRPCCode != codes.ResourceExhausted {
		t.Errorf("kind/code = %v %v", failure.Kind, failure.GRPCCode)
	}
	if failure.RetryAfter != 7*time.Second || failure.HTTP.GetStatusCode() != 429 {
		t.Errorf("retry/http = %v %v", failure.RetryAfter, failure.HTTP)
	}
	if failure.Explanation != quotaFailure().GetExplanation() {
		t.Errorf("explanation = %q", failure.Explanation)
	}
}

func TestCallModelSuccess(t *testing.T) {
	c, _ := serve(t, "tcp", "127.0.0.1:0")
	reply, err := c.CallModel(ctxFor(t), &sidecarv1.CallModelRequest{Model: "fast"})
	if err != nil || reply.GetMessage().GetText() != "hello" {
		t.Fatalf("reply = %v, %v", reply, err)
	}
}

func TestTheContextDeadlineTravelsToTheSidecar(t *testing.T) {
	c, fake := serve(t, "tcp", "127.0.0.1:0")
	want := time.Now().Add(3 * time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), want)
	defer cancel()
	if _, err := c.CallModel(ctx, &sidecarv1.CallModelRequest{Model: "deadline"}); err != nil {
		t.Fatal(err)
	}
	got := <-fake.deadline
	if got.IsZero() || got.After(want.Add(50*time.Millisecond)) || got.Before(want.Add(-time.Second)) {
		t.Errorf("server deadline %v, client deadline %v", got, want)
	}
}

func TestCancellingTheContextEndsTheCall(t *testing.T) {
	c, _ := serve(t, "tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := c.CallModel(ctx, &sidecarv1.CallModelRequest{Model: "slow"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want one matching context.Canceled", err)
	}
	if FromError(err).GRPCCode != codes.Canceled {
		t.Errorf("code = %v", FromError(err).GRPCCode)
	}
}

func TestAnExpiredDeadlineEndsTheCall(t *testing.T) {
	c, _ := serve(t, "tcp", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.CallModel(ctx, &sidecarv1.CallModelRequest{Model: "slow"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want one matching context.DeadlineExceeded", err)
	}
}

func TestAToolFailureIsAnOutcomeNotAnError(t *testing.T) {
	c, _ := serve(t, "tcp", "127.0.0.1:0")
	outcome, err := c.RunToolCall(ctxFor(t), &sidecarv1.ToolCall{Id: "call_1", Name: "get_doc", ArgumentsJson: `{"id":"nope"}`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !outcome.IsError() || outcome.Result() != nil {
		t.Fatal("want a failure outcome")
	}
	var failure *Error
	if !errors.As(outcome.Err(), &failure) || failure.Kind != sidecarv1.FailureKind_FAILURE_KIND_RESOURCE_NOT_FOUND || !failure.Correctable || failure.GRPCCode != codes.OK {
		t.Errorf("failure = %+v", failure)
	}
	wantText := "No document with id 'nope' exists.\n" + CorrectableLine
	if outcome.ModelText() != wantText {
		t.Errorf("model text = %q", outcome.ModelText())
	}

	openai, _ := json.Marshal(outcome.OpenAIMessage())
	wantOpenAI, _ := json.Marshal(map[string]any{"role": "tool", "tool_call_id": "call_1", "content": wantText})
	if !jsonEqual(t, openai, wantOpenAI) {
		t.Errorf("openai = %s", openai)
	}
	anthropic, _ := json.Marshal(outcome.AnthropicBlock())
	wantAnthropic, _ := json.Marshal(map[string]any{"type": "tool_result", "tool_use_id": "call_1", "content": wantText, "is_error": true})
	if !jsonEqual(t, anthropic, wantAnthropic) {
		t.Errorf("anthropic = %s", anthropic)
	}
	tr := outcome.ToolCallResult()
	if tr.GetCallId() != "call_1" || !tr.GetIsError() || tr.GetName() != "get_doc" || tr.GetContent() != wantText {
		t.Errorf("tool call result = %v", tr)
	}
}

func TestAToolResultHasNoIsErrorField(t *testing.T) {
	c, _ := serve(t, "tcp", "127.0.0.1:0")
	outcome, err := c.ExecuteTool(ctxFor(t), &sidecarv1.ExecuteToolRequest{Tool: "search", ArgumentsJson: `{"q":"x"}`, CallId: "toolu_9"})
	if err != nil {
		t.Fatal(err)
	}
	if outcome.IsError() || outcome.Err() != nil || outcome.Failure() != nil || !outcome.Result().GetEmpty() {
		t.Fatalf("outcome = %v", outcome.Response)
	}
	anthropic, _ := json.Marshal(outcome.AnthropicBlock())
	if !jsonEqual(t, anthropic, []byte(`{"type":"tool_result","tool_use_id":"toolu_9","content":"{\"hits\":[]}"}`)) {
		t.Errorf("anthropic = %s", anthropic)
	}
	msg := ToolMessage(outcome)
	if msg.GetRole() != sidecarv1.Role_ROLE_TOOL || len(msg.GetToolResults()) != 1 || msg.GetToolResults()[0].GetIsError() {
		t.Errorf("tool message = %v", msg)
	}
}

func TestAMalformedToolRequestFailsTheRPC(t *testing.T) {
	c, _ := serve(t, "tcp", "127.0.0.1:0")
	_, err := c.ExecuteTool(ctxFor(t), &sidecarv1.ExecuteToolRequest{Tool: "nope"})
	var failure *Error
	if !errors.As(err, &failure) || failure.GRPCCode != codes.InvalidArgument {
		t.Fatalf("err = %v", err)
	}
}

func TestListTools(t *testing.T) {
	c, _ := serve(t, "tcp", "127.0.0.1:0")
	tools, err := c.ListTools(ctxFor(t))
	if err != nil || len(ToolDefinitions(tools)) != 1 || ToolDefinitions(tools)[0].GetName() != "search" {
		t.Fatalf("tools = %v, %v", tools, err)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
