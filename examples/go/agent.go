// Command agent is a minimal agent loop on the sidecar: call the model, run
// each tool call it makes through ExecuteTool, hand model_text back, repeat
// until the model answers. With -stream each reply is streamed (StreamModel)
// and printed as it is written; a restart event voids what was printed since
// the last one, and the final reply is what the loop uses.
//
//	SIDECAR_ADDR=127.0.0.1:50051 go run . -task "How does the sidecar retry rate limits?"
//	SIDECAR_ADDR=127.0.0.1:50051 go run . -stream -task "..."
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

// ShowEvent gets each streamed event as it arrives.
type ShowEvent func(*sidecarv1.StreamModelEvent)

// RunAgent runs the loop for task and returns the model's answer. An empty
// model means the first one in the catalog. With show, each reply is streamed
// (StreamModel) and every event goes to show as it arrives; without it, each
// reply is one CallModel.
func RunAgent(ctx context.Context, c *sidecar.Client, model, task string, maxTurns int, trace io.Writer, show ShowEvent) (string, error) {
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
		reply, err := modelReply(ctx, c, &sidecarv1.CallModelRequest{
			Model: model, Messages: msgs, Tools: sidecar.ToolDefinitions(tools), Job: job,
		}, show)
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

// modelReply is one model call: CallModel, or StreamModel with each event
// shown as it comes. A stream's failure is the *sidecar.Error CallModel
// returns for it.
func modelReply(ctx context.Context, c *sidecar.Client, req *sidecarv1.CallModelRequest, show ShowEvent) (*sidecarv1.CallModelResponse, error) {
	if show == nil {
		return c.CallModel(ctx, req)
	}
	stream, err := c.StreamModel(ctx, req)
	if err != nil {
		return nil, err
	}
	for event, err := range stream.Events() {
		if err != nil {
			return nil, err
		}
		show(event)
	}
	return stream.Collect() // the whole reply, whatever restarts came before it
}

// PrintEvents shows a stream on a terminal: text as it comes; a restart
// voids what was printed, and says so.
func PrintEvents(w io.Writer) ShowEvent {
	return func(event *sidecarv1.StreamModelEvent) {
		switch e := event.GetEvent().(type) {
		case *sidecarv1.StreamModelEvent_Text:
			fmt.Fprint(w, e.Text.GetText())
		case *sidecarv1.StreamModelEvent_Restart:
			fmt.Fprintf(w, "\n--- restarted (%s): discard the text above ---\n", e.Restart.GetReason())
		case *sidecarv1.StreamModelEvent_Final:
			if e.Final.GetMessage().GetText() != "" {
				fmt.Fprintln(w) // the reply's last line ends
			}
		}
	}
}

func main() {
	addr := flag.String("addr", os.Getenv("SIDECAR_ADDR"), "the sidecar: host:port or unix:/path (default $SIDECAR_ADDR)")
	model := flag.String("model", "", "a catalog model id (default: the first one)")
	task := flag.String("task", "Find what the documentation says about retries and summarise it.", "what to ask")
	stream := flag.Bool("stream", false, "stream each reply (StreamModel) as it is written")
	flag.Parse()

	c, err := sidecar.Dial(*addr)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var show ShowEvent
	if *stream {
		show = PrintEvents(os.Stdout)
	}
	answer, err := RunAgent(ctx, c, *model, *task, 8, os.Stderr, show)
	if err != nil {
		log.Fatal(err)
	}
	if !*stream { // streamed, it has been printed as it came
		fmt.Println(answer)
	}
}
