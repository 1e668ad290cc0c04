package sidecar

// The StreamModel half of the Go conformance runner (tests/conformance/README.md,
// "A StreamModel case"): read the stream through ModelStream, cancel it after
// cancel_after_events when the case says so, and observe the events' kinds, the
// restarts, the accumulated text, the final reply or the failure.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

// How long the runner polls the fake provider for client_disconnected after a cancel.
const (
	disconnectWait = 5 * time.Second
	disconnectPoll = 20 * time.Millisecond
)

// streamSetup is what a StreamModel case adds to its call.
type streamSetup struct {
	cancelAfter *int   // cancel after this many events (nil: read to the end)
	providerURL string // asked whether the sidecar left the cancelled request
}

// observeStream reads one StreamModel call and builds its observation.
func observeStream(t *testing.T, ctx context.Context, c *Client, req *sidecarv1.CallModelRequest, s streamSetup) map[string]any {
	t.Helper()
	stream, err := c.StreamModel(ctx, req)
	if err != nil {
		return withRoute(failedRPC(t, err), "", errorHops(err))
	}
	kinds := []any{}
	restarts := []any{}
	obs := map[string]any{"grpc_code": "OK", "outcome": "result", "failure": nil}
	for {
		event, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			obs = withRoute(failedRPC(t, err), "", errorHops(err))
			break
		}
		kinds = append(kinds, eventKind(event))
		if r := event.GetRestart(); r != nil {
			restarts = append(restarts, map[string]any{
				"cause":   strings.TrimPrefix(r.GetCause().String(), "RESTART_CAUSE_"),
				"reason":  r.GetReason(),
				"attempt": float64(r.GetAttempt()),
			})
		}
		if s.cancelAfter != nil && len(kinds) == *s.cancelAfter {
			stream.Cancel()
		}
	}
	obs["events"] = kinds
	obs["restarts"] = restarts
	obs["stream_text"] = stream.Text()
	obs["final"] = nil
	if final := stream.Final(); final != nil {
		obs["result_text"] = final.GetMessage().GetText()
		obs["final"] = map[string]any{
			"attempts":             float64(final.GetAttempts()),
			"corrections":          float64(final.GetCorrections()),
			"output_budget_raised": final.GetOutputBudgetRaised(),
			"finish_reason":        strings.TrimPrefix(final.GetFinishReason().String(), "FINISH_REASON_"),
		}
		obs = withCompaction(withRoute(obs, final.GetServedBy(), final.GetHops()), final)
	}
	if s.cancelAfter != nil {
		obs["provider_disconnected"] = providerDisconnected(t, s.providerURL, req.GetModel())
	}
	return obs
}

// eventKind is the set field of the event oneof, in proto field-name form.
func eventKind(e *sidecarv1.StreamModelEvent) string {
	switch e.GetEvent().(type) {
	case *sidecarv1.StreamModelEvent_Text:
		return "text"
	case *sidecarv1.StreamModelEvent_ToolCall:
		return "tool_call"
	case *sidecarv1.StreamModelEvent_Restart:
		return "restart"
	case *sidecarv1.StreamModelEvent_Final:
		return "final"
	}
	return "unknown"
}

func observeStreamDetail(d *sidecarv1.StreamDetail) any {
	if d == nil {
		return nil
	}
	return map[string]any{"partial_text": d.GetPartialText(), "reason": d.GetReason(), "deltas_sent": float64(d.GetDeltasSent())}
}

// providerDisconnected polls the fake provider until its last request for model
// records the client leaving, or disconnectWait has passed.
func providerDisconnected(t *testing.T, providerURL, model string) bool {
	t.Helper()
	target := providerURL + "/_fake/requests?" + url.Values{"model": {model}}.Encode()
	deadline := time.Now().Add(disconnectWait)
	for {
		resp, err := http.Get(target)
		if err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
		var records []map[string]any
		err = json.NewDecoder(resp.Body).Decode(&records)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
		if n := len(records); n > 0 && records[n-1]["client_disconnected"] == true {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(disconnectPoll)
	}
}

// checkStream compares a StreamModel case's events, restarts, stream_text, final and provider_disconnected.
func checkStream(expect, observed map[string]any) []string {
	var problems []string
	for _, key := range []string{"events", "stream_text", "provider_disconnected"} {
		if want, ok := expect[key]; ok && !reflect.DeepEqual(want, observed[key]) {
			problems = append(problems, fmt.Sprintf("%s: want %#v, got %#v", key, want, observed[key]))
		}
	}
	if want, ok := expect["restarts"].([]any); ok {
		got, _ := observed["restarts"].([]any)
		if len(want) != len(got) {
			problems = append(problems, fmt.Sprintf("restarts: want %d restarts, got %d: %#v", len(want), len(got), got))
		} else {
			for i := range want {
				w, _ := want[i].(map[string]any)
				g, _ := got[i].(map[string]any)
				problems = append(problems, checkKeys(fmt.Sprintf("restarts[%d]", i), w, g, "cause", "reason", "attempt")...)
			}
		}
	}
	if want, ok := expect["final"]; ok {
		got, _ := observed["final"].(map[string]any)
		switch w := want.(type) {
		case nil:
			if got != nil {
				problems = append(problems, fmt.Sprintf("final: want none, got %#v", got))
			}
		case map[string]any:
			if got == nil {
				problems = append(problems, fmt.Sprintf("final: want %#v, got none", w))
			} else {
				problems = append(problems, checkKeys("final", w, got, "attempts", "corrections", "output_budget_raised", "finish_reason")...)
			}
		}
	}
	return problems
}

// checkStreamDetail compares failure.stream: null means absent, an object each given key.
func checkStreamDetail(want, got map[string]any) []string {
	w, ok := want["stream"]
	if !ok {
		return nil
	}
	g, _ := got["stream"].(map[string]any)
	switch w := w.(type) {
	case nil:
		if g != nil {
			return []string{fmt.Sprintf("failure.stream: want absent, got %#v", g)}
		}
	case map[string]any:
		if g == nil {
			return []string{fmt.Sprintf("failure.stream: want %#v, got absent", w)}
		}
		return checkKeys("failure.stream", w, g, "partial_text", "reason", "deltas_sent")
	}
	return nil
}

// checkKeys compares each of keys that want gives, and reason_contains as a substring of reason.
func checkKeys(where string, want, got map[string]any, keys ...string) []string {
	var problems []string
	for _, key := range keys {
		if w, ok := want[key]; ok && got[key] != w {
			problems = append(problems, fmt.Sprintf("%s.%s: want %#v, got %#v", where, key, w, got[key]))
		}
	}
	if part, ok := want["reason_contains"].(string); ok {
		if reason, _ := got["reason"].(string); !strings.Contains(reason, part) {
			problems = append(problems, fmt.Sprintf("%s.reason: want it to contain %q, got %q", where, part, reason))
		}
	}
	return problems
}
