package sidecar

// The Go client's runner of the one conformance suite (tests/conformance/README.md
// is the spec): reads the cases, scripts the fakes, makes each call through this
// package and compares what it observed. It runs under the harness
// (tests/conformance/harness.py), which sets SIDECAR_ADDR and the fakes' URLs;
// without them it is skipped. With CONFORMANCE_REPORT set it appends each case's
// result to that file, one JSON line (tests/conformance/conformance_report.py).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

const defaultCaseDeadline = 15 * time.Second

type conformanceCall struct {
	RPC     string          `json:"rpc"`
	Request json.RawMessage `json:"request"`
}

type conformanceCase struct {
	Name  string `json:"name"`
	RPC   string `json:"rpc"`
	Setup struct {
		ToolBackend []json.RawMessage `json:"tool_backend"`
		Provider    []json.RawMessage `json:"provider"`
	} `json:"setup"`
	Before  []conformanceCall `json:"before"`
	Request json.RawMessage   `json:"request"`
	// Build (a Build case): the request this package's builders make (conformance_build_test.go).
	Build      json.RawMessage `json:"build"`
	DeadlineMS int             `json:"deadline_ms"`
	// CancelAfterEvents (StreamModel): cancel the stream after reading this many events.
	CancelAfterEvents *int           `json:"cancel_after_events"`
	Expect            map[string]any `json:"expect"`
}

type conformanceEnv struct {
	addr, providerURL, toolURL string
}

// caseReport is one line of CONFORMANCE_REPORT.
type caseReport struct {
	Name     string   `json:"name"`
	Passed   bool     `json:"passed"`
	Problems []string `json:"problems"`
	StartMS  int64    `json:"start_ms"`
	EndMS    int64    `json:"end_ms"`
}

// reportCase appends one case's result to CONFORMANCE_REPORT, when the harness set it.
func reportCase(t *testing.T, r caseReport) {
	path := os.Getenv("CONFORMANCE_REPORT")
	if path == "" {
		return
	}
	line, err := json.Marshal(r)
	if err != nil {
		t.Errorf("report: %v", err)
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("report: %v", err)
		return
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Write(append(line, '\n')); err != nil {
		t.Errorf("report: %v", err)
	}
}

func TestConformance(t *testing.T) {
	env := conformanceEnv{os.Getenv("SIDECAR_ADDR"), os.Getenv("FAKE_PROVIDER_URL"), os.Getenv("TOOL_BACKEND_URL")}
	if env.addr == "" || env.providerURL == "" || env.toolURL == "" {
		if os.Getenv("CONFORMANCE_REQUIRED") != "" {
			t.Fatal("CONFORMANCE_REQUIRED is set but SIDECAR_ADDR, FAKE_PROVIDER_URL or TOOL_BACKEND_URL is not")
		}
		t.Skip("no sidecar: run tests/conformance/harness.py (it sets SIDECAR_ADDR and the fakes' URLs)")
	}
	dir := os.Getenv("CONFORMANCE_CASES")
	if dir == "" {
		dir = filepath.Join("..", "..", "tests", "conformance", "cases")
	}
	cases := loadConformanceCases(t, dir)
	client, err := Dial(env.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Close() }()

	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			report := caseReport{Name: c.Name, StartMS: time.Now().UnixMilli(), Problems: []string{}}
			defer func() {
				report.EndMS = time.Now().UnixMilli()
				report.Passed = !t.Failed()
				if t.Failed() && len(report.Problems) == 0 {
					report.Problems = []string{"the case stopped before its comparison (see the runner's output)"}
				}
				reportCase(t, report)
			}()
			if c.RPC == "Build" {
				observed, err := observeBuild(c.Request, c.Build, dir)
				if err != nil {
					t.Fatalf("build: %v", err)
				}
				if problems := checkBuild(expandPlaceholders(c.Expect, env).(map[string]any), observed); len(problems) > 0 {
					report.Problems = problems
					got, _ := json.Marshal(observed)
					t.Errorf("%s\nobserved: %s", strings.Join(problems, "\n"), got)
				}
				return
			}
			prepareFakes(t, env, c)
			deadline := defaultCaseDeadline
			if c.DeadlineMS > 0 {
				deadline = time.Duration(c.DeadlineMS) * time.Millisecond
			}
			for _, b := range c.Before {
				observeCall(t, client, b.RPC, b.Request, deadline, streamSetup{})
			}
			observed := observeCall(t, client, c.RPC, c.Request, deadline, streamSetup{c.CancelAfterEvents, env.providerURL})
			if problems := checkConformance(expandPlaceholders(c.Expect, env).(map[string]any), observed); len(problems) > 0 {
				report.Problems = problems
				got, _ := json.Marshal(observed)
				t.Errorf("%s\nobserved: %s", strings.Join(problems, "\n"), got)
			}
		})
	}
}

func loadConformanceCases(t *testing.T, dir string) []conformanceCase {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no cases in %s (%v)", dir, err)
	}
	sort.Strings(paths)
	cases := make([]conformanceCase, 0, len(paths))
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var c conformanceCase
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if c.Name == "" || c.Expect == nil {
			t.Fatalf("%s: a case needs a name and an expect", p)
		}
		cases = append(cases, c)
	}
	return cases
}

func prepareFakes(t *testing.T, env conformanceEnv, c conformanceCase) {
	t.Helper()
	postJSON(t, env.providerURL+"/_fake/reset", []byte("{}"))
	postJSON(t, env.toolURL+"/_fake/reset", []byte("{}"))
	for _, s := range c.Setup.ToolBackend {
		postJSON(t, env.toolURL+"/_fake/script", s)
	}
	for _, s := range c.Setup.Provider {
		postJSON(t, env.providerURL+"/_fake/script", s)
	}
}

func postJSON(t *testing.T, url string, body []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: HTTP %d", url, resp.StatusCode)
	}
}

// observeCall makes one call through the client and builds the observation.
func observeCall(t *testing.T, c *Client, rpc string, request json.RawMessage, deadline time.Duration, s streamSetup) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	switch rpc {
	case "ExecuteTool":
		req := &sidecarv1.ExecuteToolRequest{}
		unmarshalRequest(t, request, req)
		outcome, err := c.ExecuteTool(ctx, req)
		if err != nil {
			return failedRPC(t, err)
		}
		obs := map[string]any{"grpc_code": "OK", "model_text": outcome.ModelText()}
		if outcome.IsError() {
			obs["outcome"] = "failure"
			obs["failure"] = observeError(outcome.Failure())
		} else {
			obs["outcome"] = "result"
			obs["result_text"] = outcome.Result().GetContent()
		}
		return obs
	case "CallModel":
		req := &sidecarv1.CallModelRequest{}
		unmarshalRequest(t, request, req)
		reply, err := c.CallModel(ctx, req)
		if err != nil {
			return withRoute(failedRPC(t, err), "", errorHops(err))
		}
		obs := map[string]any{"grpc_code": "OK", "outcome": "result", "result_text": reply.GetMessage().GetText()}
		return withCompaction(withRoute(obs, reply.GetServedBy(), reply.GetHops()), reply)
	case "StreamModel":
		req := &sidecarv1.CallModelRequest{}
		unmarshalRequest(t, request, req)
		return observeStream(t, ctx, c, req, s)
	case "ClassifyFailure":
		req := &sidecarv1.ClassifyFailureRequest{}
		unmarshalRequest(t, request, req)
		f, err := c.ClassifyFailure(ctx, req)
		if err != nil {
			return failedRPC(t, err)
		}
		outcome := "failure"
		if f.GetKind() == sidecarv1.FailureKind_FAILURE_KIND_UNSPECIFIED {
			outcome = "result"
		}
		return map[string]any{"grpc_code": "OK", "outcome": outcome, "failure": observeError(FromFailure(f))}
	}
	t.Fatalf("unknown rpc %q", rpc)
	return nil
}

func unmarshalRequest(t *testing.T, raw json.RawMessage, m proto.Message) {
	t.Helper()
	if err := protojson.Unmarshal(raw, m); err != nil {
		t.Fatalf("request %s: %v", raw, err)
	}
}

func failedRPC(t *testing.T, err error) map[string]any {
	t.Helper()
	var failure *Error
	if !errors.As(err, &failure) {
		t.Fatalf("the client returned %T, not *sidecar.Error: %v", err, err)
	}
	return map[string]any{"grpc_code": CodeName(failure.GRPCCode), "outcome": "failure", "failure": observeError(failure)}
}

func observeError(e *Error) map[string]any {
	obs := map[string]any{
		"kind":                KindName(e.Kind),
		"correctable":         e.Correctable,
		"message":             e.Message,
		"explanation":         e.Explanation,
		"http":                nil,
		"retry_after_seconds": nil,
		"attempts":            float64(e.Attempts),
		"detail":              nil,
	}
	if e.HTTP != nil {
		var raw any
		if e.HTTP.RetryAfterRaw != nil {
			raw = e.HTTP.GetRetryAfterRaw()
		}
		obs["http"] = map[string]any{
			"status_code":     float64(e.HTTP.GetStatusCode()),
			"service":         e.HTTP.GetService(),
			"endpoint":        e.HTTP.GetEndpoint(),
			"body":            e.HTTP.GetBody(),
			"retry_after_raw": raw,
		}
	}
	if e.RetryAfter != 0 {
		obs["retry_after_seconds"] = e.RetryAfter.Seconds()
	}
	if e.Failure != nil {
		if field := e.Failure.ProtoReflect().WhichOneof(e.Failure.ProtoReflect().Descriptor().Oneofs().ByName("detail")); field != nil {
			obs["detail"] = string(field.Name())
		}
	}
	obs["stream"] = observeStreamDetail(e.StreamDetail())
	return obs
}

// expandPlaceholders replaces ${FAKE_PROVIDER_URL} and ${TOOL_BACKEND_URL} in every string.
func expandPlaceholders(v any, env conformanceEnv) any {
	switch x := v.(type) {
	case string:
		x = strings.ReplaceAll(x, "${FAKE_PROVIDER_URL}", env.providerURL)
		return strings.ReplaceAll(x, "${TOOL_BACKEND_URL}", env.toolURL)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = expandPlaceholders(e, env)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = expandPlaceholders(e, env)
		}
		return out
	}
	return v
}

func checkConformance(expect, observed map[string]any) []string {
	var problems []string
	differ := func(what string, want, got any) {
		problems = append(problems, fmt.Sprintf("%s: want %#v, got %#v", what, want, got))
	}
	if observed["grpc_code"] != expect["grpc_code"] {
		differ("grpc_code", expect["grpc_code"], observed["grpc_code"])
	}
	if want, ok := expect["outcome"]; ok && observed["outcome"] != want {
		differ("outcome", want, observed["outcome"])
	}
	if want, ok := expect["failure"]; ok {
		got, _ := observed["failure"].(map[string]any)
		switch w := want.(type) {
		case nil:
			if got != nil {
				differ("failure", nil, got)
			}
		case map[string]any:
			if got == nil {
				differ("failure", w, nil)
			} else {
				problems = append(problems, checkFailure(w, got)...)
			}
		}
	}
	for key, field := range map[string]string{"result_contains": "result_text", "model_text_contains": "model_text"} {
		if want, ok := expect[key].(string); ok {
			got, _ := observed[field].(string)
			if !strings.Contains(got, want) {
				problems = append(problems, fmt.Sprintf("%s: want it to contain %q, got %q", field, want, got))
			}
		}
	}
	if want, ok := expect["model_text"]; ok && observed["model_text"] != want {
		differ("model_text", want, observed["model_text"])
	}
	problems = append(problems, checkRoute(expect, observed)...)
	problems = append(problems, checkCompaction(expect, observed)...)
	problems = append(problems, checkStream(expect, observed)...)
	sort.Strings(problems)
	return problems
}

// withRoute adds a CallModel's served_by and hops to its observation (a route's story).
func withRoute(obs map[string]any, servedBy string, hops []*sidecarv1.Hop) map[string]any {
	listed := make([]any, 0, len(hops))
	for _, h := range hops {
		listed = append(listed, map[string]any{
			"deployment": h.GetDeployment(),
			"kind":       KindName(h.GetKind()),
			"attempts":   float64(h.GetAttempts()),
			"skipped":    h.GetSkipped(),
			"reason":     h.GetReason(),
			"hedge":      h.GetHedge(),
			"cancelled":  h.GetCancelled(),
		})
	}
	obs["served_by"] = servedBy
	obs["hops"] = listed
	return obs
}

// withCompaction adds a CallModel reply's compaction to its observation: nil when it compacted
// nothing; its messages as canonical proto3 JSON, parsed back into plain values.
func withCompaction(obs map[string]any, reply *sidecarv1.CallModelResponse) map[string]any {
	c := reply.GetCompaction()
	if c == nil {
		obs["compaction"] = nil
		return obs
	}
	steps := make([]any, 0, len(c.GetSteps()))
	for _, s := range c.GetSteps() {
		turns := make([]any, 0, len(s.GetTurns()))
		for _, turn := range s.GetTurns() {
			turns = append(turns, float64(turn))
		}
		steps = append(steps, map[string]any{
			"strategy":      strings.TrimPrefix(s.GetStrategy().String(), "COMPACTION_STRATEGY_"),
			"turns":         turns,
			"tokens_before": float64(s.GetTokensBefore()),
			"tokens_after":  float64(s.GetTokensAfter()),
		})
	}
	messages := make([]any, 0, len(c.GetMessages()))
	for _, m := range c.GetMessages() {
		raw, err := protojson.Marshal(m)
		var value any
		if err == nil {
			err = json.Unmarshal(raw, &value)
		}
		if err != nil {
			value = fmt.Sprintf("unprintable message: %v", err)
		}
		messages = append(messages, value)
	}
	obs["compaction"] = map[string]any{
		"trigger":          strings.TrimPrefix(c.GetTrigger().String(), "COMPACTION_TRIGGER_"),
		"tokens_before":    float64(c.GetTokensBefore()),
		"tokens_after":     float64(c.GetTokensAfter()),
		"steps":            steps,
		"messages":         messages,
		"summarizer_calls": float64(c.GetSummarizerCalls()),
	}
	return obs
}

// checkCompaction compares compaction: null absent; an object present with each given key equal,
// steps as many as listed (each given key equal), messages equal as canonical proto3 JSON.
func checkCompaction(expect, observed map[string]any) []string {
	want, ok := expect["compaction"]
	if !ok {
		return nil
	}
	got, _ := observed["compaction"].(map[string]any)
	w, _ := want.(map[string]any)
	switch {
	case w == nil && got == nil:
		return nil
	case w == nil:
		return []string{fmt.Sprintf("compaction: want none, got %#v", got)}
	case got == nil:
		return []string{fmt.Sprintf("compaction: want %#v, got none", w)}
	}
	var problems []string
	for _, key := range []string{"trigger", "tokens_before", "tokens_after", "summarizer_calls", "messages"} {
		if value, ok := w[key]; ok && !reflect.DeepEqual(got[key], value) {
			problems = append(problems, fmt.Sprintf("compaction.%s: want %#v, got %#v", key, value, got[key]))
		}
	}
	wantSteps, ok := w["steps"].([]any)
	if !ok {
		return problems
	}
	gotSteps, _ := got["steps"].([]any)
	if len(wantSteps) != len(gotSteps) {
		return append(problems, fmt.Sprintf("compaction.steps: want %d steps, got %d: %#v", len(wantSteps), len(gotSteps), gotSteps))
	}
	for i := range wantSteps {
		ws, _ := wantSteps[i].(map[string]any)
		gs, _ := gotSteps[i].(map[string]any)
		for _, key := range []string{"strategy", "turns", "tokens_before", "tokens_after"} {
			if value, ok := ws[key]; ok && !reflect.DeepEqual(gs[key], value) {
				problems = append(problems, fmt.Sprintf("compaction.steps[%d].%s: want %#v, got %#v", i, key, value, gs[key]))
			}
		}
	}
	return problems
}

func errorHops(err error) []*sidecarv1.Hop {
	var failure *Error
	if errors.As(err, &failure) {
		return failure.Hops
	}
	return nil
}

// checkRoute compares served_by, and hops: as many as listed, each given key equal (reason_contains: a substring).
func checkRoute(expect, observed map[string]any) []string {
	var problems []string
	if want, ok := expect["served_by"]; ok && observed["served_by"] != want {
		problems = append(problems, fmt.Sprintf("served_by: want %#v, got %#v", want, observed["served_by"]))
	}
	want, ok := expect["hops"].([]any)
	if !ok {
		return problems
	}
	got, _ := observed["hops"].([]any)
	if len(want) != len(got) {
		return append(problems, fmt.Sprintf("hops: want %d hops, got %d: %#v", len(want), len(got), got))
	}
	for i := range want {
		w, _ := want[i].(map[string]any)
		g, _ := got[i].(map[string]any)
		for _, key := range []string{"deployment", "kind", "attempts", "skipped", "reason", "hedge", "cancelled"} {
			if value, ok := w[key]; ok && g[key] != value {
				problems = append(problems, fmt.Sprintf("hops[%d].%s: want %#v, got %#v", i, key, value, g[key]))
			}
		}
		if part, ok := w["reason_contains"].(string); ok {
			if reason, _ := g["reason"].(string); !strings.Contains(reason, part) {
				problems = append(problems, fmt.Sprintf("hops[%d].reason: want it to contain %q, got %q", i, part, reason))
			}
		}
	}
	return problems
}

func checkFailure(want, got map[string]any) []string {
	var problems []string
	for _, key := range []string{"kind", "correctable", "message", "explanation", "attempts", "detail"} {
		if w, ok := want[key]; ok && got[key] != w {
			problems = append(problems, fmt.Sprintf("failure.%s: want %#v, got %#v", key, w, got[key]))
		}
	}
	for _, key := range []string{"message", "explanation"} {
		if part, ok := want[key+"_contains"].(string); ok {
			if s, _ := got[key].(string); !strings.Contains(s, part) {
				problems = append(problems, fmt.Sprintf("failure.%s: want it to contain %q, got %q", key, part, s))
			}
		}
	}
	if w, ok := want["http"]; ok {
		g, _ := got["http"].(map[string]any)
		switch w := w.(type) {
		case nil:
			if g != nil {
				problems = append(problems, fmt.Sprintf("failure.http: want absent, got %#v", g))
			}
		case map[string]any:
			if g == nil {
				problems = append(problems, fmt.Sprintf("failure.http: want %#v, got absent", w))
				break
			}
			for key, value := range w {
				if g[key] != value {
					problems = append(problems, fmt.Sprintf("failure.http.%s: want %#v, got %#v", key, value, g[key]))
				}
			}
		}
	}
	problems = append(problems, checkStreamDetail(want, got)...)
	if w, ok := want["retry_after_seconds"]; ok {
		g := got["retry_after_seconds"]
		switch w := w.(type) {
		case nil:
			if g != nil {
				problems = append(problems, fmt.Sprintf("failure.retry_after_seconds: want absent, got %v", g))
			}
		case float64:
			if gf, ok := g.(float64); !ok || math.Abs(gf-w) > 1e-3 {
				problems = append(problems, fmt.Sprintf("failure.retry_after_seconds: want %v, got %v", w, g))
			}
		}
	}
	return problems
}
