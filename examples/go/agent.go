// Command agent is a minimal agent loop on the sidecar: call the model, run
// each tool call it makes through ExecuteTool, hand model_text back, repeat
// until the model answers.
//
//	SIDECAR_ADDR=127.0.0.1:50051 go run . -task "How does the sidecar retry rate limits?"
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	sidecar "github.com/sidecar-dev/sidecar/clients/go"
	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

// RunAgent runs the loop for task and returns the model's answer. An empty
// model means the first one in the catalog.
func RunAgent(ctx context.Context, c *sidecar.Client, model, task string, maxTurns int, trace io.Writer) (string, error) {
	tools, err := c.ListTools(ctx)
	if err != nil {
		return "", err
	}
	if model == "" {
		models, err := c.ListModels(ctx)
		if err != nil || len(models) == 0 {
			return "", fmt.Errorf("no model to use: %v", err)
		}
		model = models[0].GetId()
	}
	job := &sidecarv1.Job{JobId: fmt.Sprintf("example-%d", time.Now().UnixNano())}
	msgs := []*sidecarv1.Message{{Role: sidecarv1.Role_ROLE_USER, Text: task}}
	for turn := 1; turn <= maxTurns; turn++ {
		reply, err := c.CallModel(ctx, &sidecarv1.CallModelRequest{
			Model: model, Messages: msgs, Tools: sidecar.ToolDefinitions(tools), Job: job,
		})
		var failure *sidecar.Error
		if errors.As(err, &failure) {
			return "", fmt.Errorf("turn %d: the model call failed (%s, correctable=%v): %s", turn, failure.KindName(), failure.Correctable, failure.Message)
		} else if err != nil {
			return "", err
		}
		calls := reply.GetMessage().GetToolCalls()
		if len(calls) == 0 {
			return reply.GetMessage().GetText(), nil
		}
		msgs = append(msgs, reply.GetMessage())
		outcomes := make([]*sidecar.ToolOutcome, 0, len(calls))
		for _, call := range calls {
			outcome, err := c.RunToolCall(ctx, call, job) // a tool's failure is an outcome, not an error
			if err != nil {
				return "", fmt.Errorf("turn %d: %s: %w", turn, call.GetName(), err)
			}
			what := "result"
			if outcome.IsError() {
				what = "failure " + outcome.Failure().KindName()
			}
			fmt.Fprintf(trace, "turn %d: %s -> %s\n", turn, call.GetName(), what)
			outcomes = append(outcomes, outcome)
		}
		msgs = append(msgs, sidecar.ToolMessage(outcomes...)) // each model_text goes back as it is
	}
	return "", fmt.Errorf("no answer after %d turns", maxTurns)
}

func main() {
	addr := flag.String("addr", os.Getenv("SIDECAR_ADDR"), "the sidecar: host:port or unix:/path (default $SIDECAR_ADDR)")
	model := flag.String("model", "", "a catalog model id (default: the first one)")
	task := flag.String("task", "Find what the documentation says about retries and summarise it.", "what to ask")
	flag.Parse()

	c, err := sidecar.Dial(*addr)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	answer, err := RunAgent(ctx, c, *model, *task, 8, os.Stderr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(answer)
}
