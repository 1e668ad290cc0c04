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

	sidecar "github.com/sidecar-dev/sidecar/clients/go"
	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

const notFound = "No document 'doc-404' exists.\n" + sidecar.CorrectableLine

// scriptedSidecar asks for one tool call, then answers with what the tool said.
type scriptedSidecar struct {
	sidecarv1.UnimplementedSidecarServer
}

func (scriptedSidecar) ListTools(context.Context, *sidecarv1.ListToolsRequest) (*sidecarv1.ListToolsResponse, error) {
	return &sidecarv1.ListToolsResponse{Tools: []*sidecarv1.ToolInfo{{Definition: &sidecarv1.ToolDefinition{Name: "fetch_doc"}}}}, nil
}

func (scriptedSidecar) ListModels(context.Context, *sidecarv1.ListModelsRequest) (*sidecarv1.ListModelsResponse, error) {
	return &sidecarv1.ListModelsResponse{Models: []*sidecarv1.ModelInfo{{Id: "scripted"}}}, nil
}

func (scriptedSidecar) CallModel(_ context.Context, req *sidecarv1.CallModelRequest) (*sidecarv1.CallModelResponse, error) {
	last := req.GetMessages()[len(req.GetMessages())-1]
	if last.GetRole() == sidecarv1.Role_ROLE_TOOL {
		r := last.GetToolResults()[0]
		text := "answer after " + r.GetCallId() + " is_error=" + map[bool]string{true: "true", false: "false"}[r.GetIsError()] + ": " + r.GetContent()
		return &sidecarv1.CallModelResponse{Message: &sidecarv1.Message{Role: sidecarv1.Role_ROLE_ASSISTANT, Text: text}}, nil
	}
	return &sidecarv1.CallModelResponse{Message: &sidecarv1.Message{
		Role:      sidecarv1.Role_ROLE_ASSISTANT,
		ToolCalls: []*sidecarv1.ToolCall{{Id: "call_7", Name: "fetch_doc", ArgumentsJson: `{"doc_id":"doc-404"}`}},
	}}, nil
}

func (scriptedSidecar) ExecuteTool(_ context.Context, req *sidecarv1.ExecuteToolRequest) (*sidecarv1.ExecuteToolResponse, error) {
	return &sidecarv1.ExecuteToolResponse{
		Outcome: &sidecarv1.ExecuteToolResponse_Failure{Failure: &sidecarv1.Failure{
			Kind: sidecarv1.FailureKind_FAILURE_KIND_RESOURCE_NOT_FOUND, Correctable: true, Explanation: notFound,
		}},
		ModelText: notFound, CallId: req.GetCallId(),
	}, nil
}

func TestTheLoopHandsAToolFailureBackToTheModel(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	sidecarv1.RegisterSidecarServer(srv, scriptedSidecar{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	c, err := sidecar.Dial(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()

	var trace bytes.Buffer
	answer, err := RunAgent(context.Background(), c, "", "read doc-404", 4, &trace)
	if err != nil {
		t.Fatal(err)
	}
	if answer != "answer after call_7 is_error=true: "+notFound {
		t.Errorf("answer = %q", answer)
	}
	if trace.String() != "turn 1: fetch_doc -> failure RESOURCE_NOT_FOUND\n" {
		t.Errorf("trace = %q", trace.String())
	}
}

// TestTheLoopAgainstARealSidecar runs the example against $SIDECAR_ADDR (make
// clients-examples starts one); skipped without it.
func TestTheLoopAgainstARealSidecar(t *testing.T) {
	addr := os.Getenv("SIDECAR_ADDR")
	if addr == "" {
		t.Skip("SIDECAR_ADDR is not set")
	}
	c, err := sidecar.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var trace bytes.Buffer
	answer, err := RunAgent(ctx, c, os.Getenv("SIDECAR_MODEL"), "Find what the documentation says about retries.", 6, &trace)
	if err != nil {
		t.Fatalf("%v\ntrace:\n%s", err, trace.String())
	}
	if answer == "" || !strings.HasPrefix(trace.String(), "turn 1: ") {
		t.Errorf("answer %q after trace:\n%s", answer, trace.String())
	}
	t.Logf("trace:\n%sanswer: %s", trace.String(), answer)
}
