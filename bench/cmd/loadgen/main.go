// Command loadgen drives one endpoint at a fixed concurrency for a fixed time
// and prints what it saw as JSON: throughput, latency percentiles, successes,
// failures by class, and (for the sidecar) the upstream attempts it reported.
//
// Modes:
//
//	http-chat   POST an OpenAI chat-completions body to -url (direct or LiteLLM)
//	http-tool   GET -url (direct tool endpoint); `{query}` is replaced by -query
//	grpc-model  sidecar.v1.Sidecar/CallModel on -target
//	grpc-tool   sidecar.v1.Sidecar/ExecuteTool on -target
//	http-stream POST the chat body with "stream": true to -url and read the SSE
//	            reply (direct): time to first token is the first content delta
//	grpc-stream sidecar.v1.Sidecar/StreamModel on -target: time to first token
//	            is the first text event; the call ends with the final event
//
// The stream modes also report ttft_ms (percentiles of the time to the first
// delta, successful calls only); latency_ms is each stream's total time.
//
// The run is closed-loop by default: -c workers, each sending its next request
// as soon as the last one answers. With -rate R the workers share a schedule
// of R requests per second, and latency is measured from the scheduled send
// time, so a server that falls behind is charged for the queue it causes.
//
// Only calls that complete inside the measured window (after -warmup, before
// the end) are counted; calls still in flight at the end are cancelled and
// reported as in_flight_at_end.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

type config struct {
	mode        string
	url         string
	target      string
	concurrency int
	duration    time.Duration
	warmup      time.Duration
	timeout     time.Duration
	rate        float64
	conns       int
	model       string
	tool        string
	query       string
	maxTokens   int
	imageBytes  int
	headers     headerFlags
	label       string
	probe       time.Duration
	out         string
}

// outcome is one finished call.
type outcome struct {
	ok       bool
	class    string    // failure class, empty when ok
	detail   string    // a sample message for the class
	attempts int       // upstream attempts the sidecar reported (0: unknown)
	first    time.Time // stream modes: when the first delta arrived
}

// caller sends one request.
type caller func(ctx context.Context) outcome

// workerStats is what one worker recorded in the window.
type workerStats struct {
	latOK    []time.Duration
	latAll   []time.Duration
	ttft     []time.Duration // stream modes, successful calls
	ok       int
	failed   int
	attempts int64
	withAtt  int64
	classes  map[string]int
	samples  map[string]string
}

type summary struct {
	Label          string             `json:"label"`
	Mode           string             `json:"mode"`
	Endpoint       string             `json:"endpoint"`
	Concurrency    int                `json:"concurrency"`
	Rate           float64            `json:"rate_rps,omitempty"`
	WindowS        float64            `json:"window_s"`
	WarmupS        float64            `json:"warmup_s"`
	Requests       int                `json:"requests"`
	OK             int                `json:"ok"`
	Failed         int                `json:"failed"`
	InFlightAtEnd  int64              `json:"in_flight_at_end"`
	ThroughputRPS  float64            `json:"throughput_rps"`
	CompletedRPS   float64            `json:"completed_rps"`
	LatencyMS      map[string]float64 `json:"latency_ms"`
	LatencyAllMS   map[string]float64 `json:"latency_all_ms"`
	TTFTMS         map[string]float64 `json:"ttft_ms,omitempty"`
	Errors         map[string]int     `json:"errors"`
	ErrorSamples   map[string]string  `json:"error_samples,omitempty"`
	AttemptsTotal  int64              `json:"reported_attempts_total,omitempty"`
	AttemptsCalls  int64              `json:"reported_attempts_calls,omitempty"`
	CompletedTotal int64              `json:"completed_total"`
	WallS          float64            `json:"wall_s"`
	StartedAt      string             `json:"started_at"`
}

func main() {
	var cfg config
	flag.StringVar(&cfg.mode, "mode", "http-chat", "http-chat | http-tool | grpc-model | grpc-tool | http-stream | grpc-stream")
	flag.StringVar(&cfg.url, "url", "http://127.0.0.1:18080/v1/chat/completions", "URL for the http modes")
	flag.StringVar(&cfg.target, "target", "127.0.0.1:50051", "host:port of the sidecar for the grpc modes")
	flag.IntVar(&cfg.concurrency, "c", 16, "concurrent workers (calls in flight)")
	flag.DurationVar(&cfg.duration, "d", 10*time.Second, "measured window")
	flag.DurationVar(&cfg.warmup, "warmup", 1*time.Second, "load before the window, not counted")
	flag.DurationVar(&cfg.timeout, "timeout", 30*time.Second, "per-call timeout")
	flag.Float64Var(&cfg.rate, "rate", 0, "total requests per second shared by the workers (0: closed loop)")
	flag.IntVar(&cfg.conns, "conns", 1, "gRPC connections (workers are spread over them)")
	flag.StringVar(&cfg.model, "model", "bench-model", "model name sent")
	flag.StringVar(&cfg.tool, "tool", "search", "tool name for grpc-tool")
	flag.StringVar(&cfg.query, "query", "golang generics", "search query for the tool modes")
	flag.IntVar(&cfg.maxTokens, "max-tokens", 64, "max output tokens asked for")
	flag.IntVar(&cfg.imageBytes, "image-bytes", 0, "grpc-model: the user message also carries an inline PNG image part of this many bytes")
	flag.Var(&cfg.headers, "H", "extra HTTP header `name: value` (repeatable)")
	flag.StringVar(&cfg.label, "label", "", "label copied to the output")
	flag.DurationVar(&cfg.probe, "probe", 0, "instead of a run: send one call at a time until one succeeds or this long has passed")
	flag.StringVar(&cfg.out, "o", "", "write the JSON here instead of stdout")
	flag.Parse()

	call, endpoint, closeFn, err := newCaller(&cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
	defer closeFn()

	if cfg.probe > 0 {
		os.Exit(probe(call, cfg.probe, cfg.timeout))
	}
	s := run(&cfg, call)
	s.Endpoint = endpoint
	data, _ := json.MarshalIndent(s, "", "  ")
	if cfg.out != "" {
		if err := os.WriteFile(cfg.out, append(data, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
			os.Exit(2)
		}
	} else {
		os.Stdout.Write(append(data, '\n'))
	}
}

func probe(call caller, limit, timeout time.Duration) int {
	deadline := time.Now().Add(limit)
	var last outcome
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		last = call(ctx)
		cancel()
		if last.ok {
			fmt.Fprintln(os.Stderr, "probe: ok")
			return 0
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "probe: no success within %s; last: %s %s\n", limit, last.class, last.detail)
	return 1
}

func run(cfg *config, call caller) summary {
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	windowStart := start.Add(cfg.warmup)
	end := windowStart.Add(cfg.duration)

	var seq atomic.Int64
	var inFlight atomic.Int64
	var completed atomic.Int64 // every call that finished, warm-up included
	interval := time.Duration(0)
	if cfg.rate > 0 {
		interval = time.Duration(float64(time.Second) / cfg.rate)
	}
	stats := make([]*workerStats, cfg.concurrency)
	var wg sync.WaitGroup
	for i := range cfg.concurrency {
		ws := &workerStats{classes: map[string]int{}, samples: map[string]string{}}
		stats[i] = ws
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				sent := time.Now()
				if interval > 0 {
					sent = start.Add(time.Duration(seq.Add(1)-1) * interval)
					if wait := time.Until(sent); wait > 0 {
						t := time.NewTimer(wait)
						select {
						case <-ctx.Done():
							t.Stop()
							return
						case <-t.C:
						}
					}
				}
				if !time.Now().Before(end) {
					return
				}
				inFlight.Add(1)
				cctx, ccancel := context.WithTimeout(ctx, cfg.timeout)
				o := call(cctx)
				ccancel()
				inFlight.Add(-1)
				done := time.Now()
				if ctx.Err() == nil {
					completed.Add(1)
				}
				if ctx.Err() != nil || done.Before(windowStart) || !done.Before(end) {
					continue
				}
				lat := done.Sub(sent)
				ws.latAll = append(ws.latAll, lat)
				if o.attempts > 0 {
					ws.attempts += int64(o.attempts)
					ws.withAtt++
				}
				if o.ok {
					ws.ok++
					ws.latOK = append(ws.latOK, lat)
					if !o.first.IsZero() {
						ws.ttft = append(ws.ttft, o.first.Sub(sent))
					}
				} else {
					ws.failed++
					ws.classes[o.class]++
					if _, seen := ws.samples[o.class]; !seen {
						ws.samples[o.class] = o.detail
					}
				}
			}
		}()
	}
	time.Sleep(time.Until(end))
	left := inFlight.Load()
	cancel()
	wg.Wait()
	wall := time.Since(start)

	s := summary{
		Label: cfg.label, Mode: cfg.mode, Concurrency: cfg.concurrency, Rate: cfg.rate,
		WindowS: cfg.duration.Seconds(), WarmupS: cfg.warmup.Seconds(), InFlightAtEnd: left,
		Errors: map[string]int{}, ErrorSamples: map[string]string{},
		StartedAt:      start.UTC().Format(time.RFC3339Nano),
		CompletedTotal: completed.Load(), WallS: wall.Seconds(),
	}
	var latOK, latAll, ttft []time.Duration
	for _, ws := range stats {
		ttft = append(ttft, ws.ttft...)
		s.OK += ws.ok
		s.Failed += ws.failed
		s.AttemptsTotal += ws.attempts
		s.AttemptsCalls += ws.withAtt
		latOK = append(latOK, ws.latOK...)
		latAll = append(latAll, ws.latAll...)
		for k, v := range ws.classes {
			s.Errors[k] += v
		}
		for k, v := range ws.samples {
			if _, seen := s.ErrorSamples[k]; !seen {
				s.ErrorSamples[k] = v
			}
		}
	}
	s.Requests = s.OK + s.Failed
	s.ThroughputRPS = float64(s.OK) / cfg.duration.Seconds()
	s.CompletedRPS = float64(s.Requests) / cfg.duration.Seconds()
	s.LatencyMS = percentiles(latOK)
	s.LatencyAllMS = percentiles(latAll)
	if len(ttft) > 0 {
		s.TTFTMS = percentiles(ttft)
	}
	return s
}

func percentiles(lat []time.Duration) map[string]float64 {
	out := map[string]float64{}
	if len(lat) == 0 {
		return out
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	at := func(q float64) float64 {
		// nearest-rank percentile
		i := int(q*float64(len(lat))+0.999999) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(lat) {
			i = len(lat) - 1
		}
		return ms(lat[i])
	}
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	out["min"] = ms(lat[0])
	out["mean"] = ms(sum / time.Duration(len(lat)))
	out["p50"] = at(0.50)
	out["p90"] = at(0.90)
	out["p99"] = at(0.99)
	out["p999"] = at(0.999)
	out["max"] = ms(lat[len(lat)-1])
	return out
}

func newCaller(cfg *config) (caller, string, func(), error) {
	switch cfg.mode {
	case "http-chat", "http-tool":
		return newHTTPCaller(cfg)
	case "grpc-model", "grpc-tool":
		return newGRPCCaller(cfg)
	case "http-stream":
		return newHTTPStreamCaller(cfg)
	case "grpc-stream":
		return newGRPCStreamCaller(cfg)
	}
	return nil, "", nil, fmt.Errorf("unknown mode %q", cfg.mode)
}

// chatBody is the same conversation the grpc-model mode sends.
func chatBody(cfg *config) []byte {
	body := map[string]any{
		"model": cfg.model,
		"messages": []map[string]string{
			{"role": "system", "content": systemPrompt},
			{"role": "user", "content": userPrompt},
		},
		"max_tokens": cfg.maxTokens,
	}
	data, _ := json.Marshal(body)
	return data
}

const systemPrompt = "You are a concise assistant. Answer in one or two sentences."
const userPrompt = "What is the capital of France, and since when has it been the capital?"

func newHTTPCaller(cfg *config) (caller, string, func(), error) {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        cfg.concurrency + 16,
		MaxIdleConnsPerHost: cfg.concurrency + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	client := &http.Client{Transport: tr}
	headers := http.Header{}
	for _, h := range cfg.headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			return nil, "", nil, fmt.Errorf("bad header %q (want `name: value`)", h)
		}
		headers.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	method, target := http.MethodPost, cfg.url
	var body []byte
	if cfg.mode == "http-chat" {
		body = chatBody(cfg)
		headers.Set("content-type", "application/json")
	} else {
		method = http.MethodGet
		target = strings.ReplaceAll(target, "{query}", url.QueryEscape(cfg.query))
	}
	call := func(ctx context.Context) outcome {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, target, rd)
		if err != nil {
			return outcome{class: "request", detail: err.Error()}
		}
		for k, v := range headers {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			return outcome{class: transportClass(err), detail: err.Error()}
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return outcome{class: transportClass(err), detail: err.Error()}
		}
		if resp.StatusCode/100 != 2 {
			return outcome{class: fmt.Sprintf("http %d", resp.StatusCode), detail: truncate(string(data), 300)}
		}
		return outcome{ok: true}
	}
	return call, method + " " + target, tr.CloseIdleConnections, nil
}

func transportClass(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	return "transport"
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// dialSidecar opens cfg.conns connections (at least one) to the sidecar: pick returns the next
// connection's client in turn, closeFn closes them all.
func dialSidecar(cfg *config) (pick func() sidecarv1.SidecarClient, closeFn func(), err error) {
	n := max(cfg.conns, 1)
	clients := make([]sidecarv1.SidecarClient, n)
	conns := make([]*grpc.ClientConn, 0, n)
	closeFn = func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for i := range n {
		conn, err := grpc.NewClient("passthrough:///"+cfg.target,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
		if err != nil {
			closeFn()
			return nil, nil, err
		}
		conns = append(conns, conn)
		clients[i] = sidecarv1.NewSidecarClient(conn)
	}
	var next atomic.Uint64
	return func() sidecarv1.SidecarClient { return clients[next.Add(1)%uint64(n)] }, closeFn, nil
}

func newGRPCCaller(cfg *config) (caller, string, func(), error) {
	pick, closeFn, err := dialSidecar(cfg)
	if err != nil {
		return nil, "", nil, err
	}

	if cfg.mode == "grpc-model" {
		message := &sidecarv1.Message{Role: sidecarv1.Role_ROLE_USER, Text: userPrompt}
		if cfg.imageBytes > 0 {
			message = &sidecarv1.Message{Role: sidecarv1.Role_ROLE_USER, Parts: []*sidecarv1.Part{
				{Kind: &sidecarv1.Part_Text{Text: userPrompt}},
				{Kind: &sidecarv1.Part_Image{Image: &sidecarv1.ImagePart{
					Source: &sidecarv1.ImagePart_Data{Data: pngOfSize(cfg.imageBytes)}, MediaType: "image/png",
				}}},
			}}
		}
		req := &sidecarv1.CallModelRequest{
			Model:           cfg.model,
			System:          systemPrompt,
			Messages:        []*sidecarv1.Message{message},
			MaxOutputTokens: proto.Uint32(uint32(cfg.maxTokens)),
			Job:             &sidecarv1.Job{JobId: "bench", WorkflowId: "bench"},
		}
		call := func(ctx context.Context) outcome {
			resp, err := pick().CallModel(ctx, req)
			if err != nil {
				return grpcFailure(err)
			}
			if resp.GetMessage().GetText() == "" && len(resp.GetMessage().GetToolCalls()) == 0 {
				return outcome{class: "empty reply", attempts: int(resp.GetAttempts())}
			}
			return outcome{ok: true, attempts: int(resp.GetAttempts())}
		}
		return call, "grpc " + cfg.target + " CallModel", closeFn, nil
	}
	args, _ := json.Marshal(map[string]string{"query": cfg.query})
	job := &sidecarv1.Job{JobId: "bench", WorkflowId: "bench"}
	var calls atomic.Uint64
	call := func(ctx context.Context) outcome {
		// Each call its own id, as an agent's are: a repeated (job, call id) is a re-send, which the
		// sidecar answers from its record without calling the tool (docs/retries.md).
		req := &sidecarv1.ExecuteToolRequest{
			Tool:          cfg.tool,
			ArgumentsJson: string(args),
			CallId:        fmt.Sprintf("call_bench_%d", calls.Add(1)),
			Job:           job,
		}
		resp, err := pick().ExecuteTool(ctx, req)
		if err != nil {
			return grpcFailure(err)
		}
		if f := resp.GetFailure(); f != nil {
			return outcome{class: "tool " + f.GetKind().String(), detail: truncate(f.GetMessage(), 300), attempts: int(resp.GetAttempts())}
		}
		return outcome{ok: true, attempts: int(resp.GetAttempts())}
	}
	return call, "grpc " + cfg.target + " ExecuteTool", closeFn, nil
}

// grpcFailure classifies a failed RPC by its code and, when the trailer
// carries one, the sidecar's Failure kind.
func grpcFailure(err error) outcome {
	st, _ := status.FromError(err)
	o := outcome{class: "grpc " + st.Code().String(), detail: truncate(st.Message(), 300)}
	for _, d := range st.Proto().GetDetails() {
		if strings.HasSuffix(d.GetTypeUrl(), "/sidecar.v1.Failure") {
			var f sidecarv1.Failure
			if proto.Unmarshal(d.GetValue(), &f) == nil {
				o.class += " " + f.GetKind().String()
				o.attempts = int(f.GetAttempts())
			}
		}
	}
	return o
}

// pngOfSize is n bytes that begin as a 1024 x 1024 PNG (a signature and an IHDR chunk, which is
// all the sidecar's token pre-check reads) and go on with bytes no compressor shrinks.
func pngOfSize(n int) []byte {
	head := []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
		0, 0, 4, 0, 0, 0, 4, 0, 8, 2, 0, 0, 0, 0, 0, 0, 0}
	out := make([]byte, n)
	copy(out, head)
	state := uint32(2463534242)
	for i := len(head); i < n; i++ {
		state ^= state << 13
		state ^= state >> 17
		state ^= state << 5
		out[i] = byte(state)
	}
	return out
}
