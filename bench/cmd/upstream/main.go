// Command upstream is the benchmark's fake provider and tool service: a fast
// net/http server that speaks the OpenAI chat-completions wire format and a
// small search endpoint, with an optional fault mix, and that counts every
// attempt it receives.
//
//	POST /v1/chat/completions   OpenAI-shaped reply with usage; with "stream": true,
//	                            an OpenAI SSE stream: a role chunk, N content deltas
//	                            (a gap between deltas), a finish chunk, a usage chunk
//	                            (stream_options.include_usage), [DONE]
//	GET  /search?q=...          small JSON result list
//	GET  /_stats[?reset=1]      attempts received, by route and status (JSON)
//	GET  /_faults?p429=0.2&p500=0.05&delay_ms=0
//	                            set the fault mix and the reply delay for
//	                            every later request (no query: show them)
//	GET  /_faults?p_slow=0.1&slow_ms=1000
//	                            a streamed reply of a model named bench-slow*: with
//	                            probability p_slow its first content delta waits
//	                            slow_ms (the hedging scenario's slow first token)
//	GET  /_stream?deltas=20&gap_ms=1
//	                            set the deltas per streamed reply and the gap between
//	                            them for every later stream (no query: show them)
//	GET  /healthz               200 "ok"
//
// A request may carry its own fault mix in the header
// `x-bench-faults: p429=0.2,p500=0.05`, which wins over the global one; this
// lets the direct path be measured under the same mix without a reset.
//
// A 429 carries `retry-after: 0` and an OpenAI `rate_limit_exceeded` body; a
// 500 carries an OpenAI `server_error` body. Faults are drawn independently for
// every attempt, so a retried call sees a fresh draw.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// faults is the mix applied to requests: probabilities of a 429 and a 500,
// and a fixed delay before any answer.
type faults struct {
	P429   float64 `json:"p429"`
	P500   float64 `json:"p500"`
	Delay  float64 `json:"delay_ms"`
	PSlow  float64 `json:"p_slow"`
	SlowMS float64 `json:"slow_ms"`
}

// slowPrefix names the models whose streams p_slow and slow_ms slow down.
const slowPrefix = "bench-slow"

// counters is one route's attempt counts by outcome.
type counters struct {
	total, ok, s429, s500, s401, s400 atomic.Int64
}

func (c *counters) snapshot(reset bool) map[string]int64 {
	load := func(v *atomic.Int64) int64 {
		if reset {
			return v.Swap(0)
		}
		return v.Load()
	}
	return map[string]int64{
		"attempts": load(&c.total), "ok": load(&c.ok), "429": load(&c.s429),
		"500": load(&c.s500), "401": load(&c.s401), "400": load(&c.s400),
	}
}

// streamShape is the shape of every streamed reply: its content deltas and the
// wait between two of them (the first goes out at once: time to first token is
// the server's own, not a gap).
type streamShape struct {
	Deltas int     `json:"deltas"`
	GapMS  float64 `json:"gap_ms"`
}

type server struct {
	key    string
	mu     sync.RWMutex
	mix    faults
	shape  streamShape
	chat   counters
	search counters
	seq    atomic.Uint64
	since  atomic.Int64 // unix nanos of the last reset
}

const rateLimitBody = `{"error":{"message":"Rate limit reached for requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 0s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
const serverErrorBody = `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`
const badRequestBody = `{"error":{"message":"We could not parse the JSON body of your request.","type":"invalid_request_error","param":null,"code":null}}`
const unauthorizedBody = `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`

func (s *server) currentMix(r *http.Request) faults {
	s.mu.RLock()
	mix := s.mix
	s.mu.RUnlock()
	if h := r.Header.Get("x-bench-faults"); h != "" {
		for _, part := range strings.Split(h, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				continue
			}
			switch k {
			case "p429":
				mix.P429 = f
			case "p500":
				mix.P500 = f
			case "delay_ms":
				mix.Delay = f
			}
		}
	}
	return mix
}

// fault answers with an injected failure when the draw says so; it reports
// whether it did.
func (s *server) fault(w http.ResponseWriter, c *counters, mix faults) bool {
	if mix.P429 <= 0 && mix.P500 <= 0 {
		return false
	}
	x := rand.Float64()
	switch {
	case x < mix.P429:
		c.s429.Add(1)
		h := w.Header()
		h.Set("content-type", "application/json")
		h.Set("retry-after", "0")
		h.Set("x-ratelimit-remaining-requests", "0")
		h.Set("x-ratelimit-reset-requests", "0s")
		h.Set("x-request-id", s.requestID())
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, rateLimitBody)
		return true
	case x < mix.P429+mix.P500:
		c.s500.Add(1)
		h := w.Header()
		h.Set("content-type", "application/json")
		h.Set("x-request-id", s.requestID())
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, serverErrorBody)
		return true
	}
	return false
}

func (s *server) requestID() string {
	return "req_" + strconv.FormatUint(s.seq.Add(1), 16)
}

// chatRequest is the part of the request the fake model looks at.
type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (s *server) handleChat(w http.ResponseWriter, r *http.Request) {
	s.chat.total.Add(1)
	body, err := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || err != nil {
		s.chat.s400.Add(1)
		http.Error(w, badRequestBody, http.StatusBadRequest)
		return
	}
	if s.key != "" && r.Header.Get("authorization") != "Bearer "+s.key {
		s.chat.s401.Add(1)
		w.Header().Set("content-type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, unauthorizedBody)
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		s.chat.s400.Add(1)
		w.Header().Set("content-type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, badRequestBody)
		return
	}
	mix := s.currentMix(r)
	if mix.Delay > 0 {
		time.Sleep(time.Duration(mix.Delay * float64(time.Millisecond)))
	}
	if s.fault(w, &s.chat, mix) {
		return
	}
	model := req.Model
	if model == "" {
		model = "bench"
	}
	id := s.seq.Add(1)
	promptTokens := 9 + len(body)/8
	if req.Stream {
		s.mu.RLock()
		shape := s.shape
		s.mu.RUnlock()
		var slow time.Duration
		if strings.HasPrefix(model, slowPrefix) && mix.PSlow > 0 && rand.Float64() < mix.PSlow {
			slow = time.Duration(mix.SlowMS * float64(time.Millisecond))
		}
		s.streamChat(w, r, id, model, promptTokens, req.StreamOptions.IncludeUsage, shape, slow)
		return
	}
	buf := make([]byte, 0, 640)
	buf = append(buf, `{"id":"chatcmpl-bench`...)
	buf = strconv.AppendUint(buf, id, 16)
	buf = append(buf, `","object":"chat.completion","created":`...)
	buf = strconv.AppendInt(buf, time.Now().Unix(), 10)
	buf = append(buf, `,"model":`...)
	buf = strconv.AppendQuote(buf, model)
	buf = append(buf, `,"choices":[{"index":0,"message":{"role":"assistant","content":"The capital of France is Paris. It has been the country's capital since the 10th century.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":`...)
	buf = strconv.AppendInt(buf, int64(promptTokens), 10)
	buf = append(buf, `,"completion_tokens":19,"total_tokens":`...)
	buf = strconv.AppendInt(buf, int64(promptTokens+19), 10)
	buf = append(buf, `,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_bench"}`...)
	h := w.Header()
	h.Set("content-type", "application/json")
	h.Set("x-request-id", "req_"+strconv.FormatUint(id, 16))
	h.Set("x-ratelimit-remaining-requests", "499")
	h.Set("x-ratelimit-reset-requests", "120ms")
	h.Set("content-length", strconv.Itoa(len(buf)))
	s.chat.ok.Add(1)
	w.Write(buf)
}

// streamWords are the deltas of a streamed reply, reused in turn.
var streamWords = strings.Fields("The capital of France is Paris. It has been the country's capital since the 10th century, " +
	"with a short break during the Second World War when the government sat in Vichy.")

// streamChat writes the reply as an OpenAI chat.completion.chunk SSE stream,
// flushing every event: a role chunk, shape.Deltas content deltas (shape.GapMS
// apart), a finish chunk, the usage chunk when asked for, and [DONE].
func (s *server) streamChat(w http.ResponseWriter, r *http.Request, id uint64, model string, promptTokens int, usage bool, shape streamShape, slow time.Duration) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("content-type", "text/event-stream; charset=utf-8")
	h.Set("cache-control", "no-cache")
	h.Set("x-request-id", "req_"+strconv.FormatUint(id, 16))
	w.WriteHeader(http.StatusOK)
	head := make([]byte, 0, 160)
	head = append(head, `data: {"id":"chatcmpl-bench`...)
	head = strconv.AppendUint(head, id, 16)
	head = append(head, `","object":"chat.completion.chunk","created":`...)
	head = strconv.AppendInt(head, time.Now().Unix(), 10)
	head = append(head, `,"model":`...)
	head = strconv.AppendQuote(head, model)
	head = append(head, `,"system_fingerprint":"fp_bench","choices":`...)
	tail := "}\n\n"
	if usage {
		tail = `,"usage":null}` + "\n\n"
	}
	buf := make([]byte, 0, 512)
	event := func(choices string) bool {
		buf = append(append(append(buf[:0], head...), choices...), tail...)
		if _, err := w.Write(buf); err != nil {
			return false
		}
		flusher.Flush()
		return true
	}
	if !event(`[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]`) {
		return
	}
	if slow > 0 { // a slow first token: the head and the role chunk are out, the content waits
		select {
		case <-r.Context().Done():
			return
		case <-time.After(slow):
		}
	}
	gap := time.Duration(shape.GapMS * float64(time.Millisecond))
	for i := range shape.Deltas {
		if i > 0 && gap > 0 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(gap):
			}
		}
		word := streamWords[i%len(streamWords)]
		if i > 0 {
			word = " " + word
		}
		content, _ := json.Marshal(word)
		if !event(`[{"index":0,"delta":{"content":` + string(content) + `},"logprobs":null,"finish_reason":null}]`) {
			return
		}
	}
	if !event(`[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]`) {
		return
	}
	if usage {
		counts := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, promptTokens, shape.Deltas, promptTokens+shape.Deltas)
		buf = append(append(append(buf[:0], head...), `[],"usage":`...), counts...)
		buf = append(buf, "}\n\n"...)
		if _, err := w.Write(buf); err != nil {
			return
		}
	}
	io.WriteString(w, "data: [DONE]\n\n")
	flusher.Flush()
	s.chat.ok.Add(1)
}

func (s *server) handleStream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	if v := q.Get("deltas"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			s.mu.Unlock()
			http.Error(w, fmt.Sprintf("bad deltas: %q", v), http.StatusBadRequest)
			return
		}
		s.shape.Deltas = n
	}
	if v := q.Get("gap_ms"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			s.mu.Unlock()
			http.Error(w, fmt.Sprintf("bad gap_ms: %q", v), http.StatusBadRequest)
			return
		}
		s.shape.GapMS = f
	}
	shape := s.shape
	s.mu.Unlock()
	w.Header().Set("content-type", "application/json")
	json.NewEncoder(w).Encode(shape)
}

func (s *server) handleSearch(w http.ResponseWriter, r *http.Request) {
	s.search.total.Add(1)
	io.Copy(io.Discard, r.Body)
	mix := s.currentMix(r)
	if mix.Delay > 0 {
		time.Sleep(time.Duration(mix.Delay * float64(time.Millisecond)))
	}
	if s.fault(w, &s.search, mix) {
		return
	}
	q := r.URL.Query().Get("q")
	buf := make([]byte, 0, 512)
	buf = append(buf, `{"query":`...)
	buf = strconv.AppendQuote(buf, q)
	buf = append(buf, `,"results":[{"title":"Result one for `...)
	buf = append(buf, jsonSafe(q)...)
	buf = append(buf, `","url":"https://example.org/1","snippet":"A short snippet of the first result."},{"title":"Result two","url":"https://example.org/2","snippet":"A short snippet of the second result."},{"title":"Result three","url":"https://example.org/3","snippet":"A short snippet of the third result."}],"total":3}`...)
	h := w.Header()
	h.Set("content-type", "application/json")
	h.Set("content-length", strconv.Itoa(len(buf)))
	s.search.ok.Add(1)
	w.Write(buf)
}

// jsonSafe keeps the characters that need no escaping inside a JSON string.
func jsonSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == '"' || r == '\\' {
			return -1
		}
		return r
	}, s)
}

func (s *server) handleStats(w http.ResponseWriter, r *http.Request) {
	reset := r.URL.Query().Get("reset") == "1"
	now := time.Now().UnixNano()
	var since int64
	if reset {
		since = s.since.Swap(now)
	} else {
		since = s.since.Load()
	}
	s.mu.RLock()
	mix := s.mix
	s.mu.RUnlock()
	out := map[string]any{
		"chat":      s.chat.snapshot(reset),
		"search":    s.search.snapshot(reset),
		"faults":    mix,
		"window_s":  float64(now-since) / 1e9,
		"reset":     reset,
		"timestamp": float64(now) / 1e9,
	}
	w.Header().Set("content-type", "application/json")
	json.NewEncoder(w).Encode(out)
}

func (s *server) handleFaults(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	for key, dst := range map[string]*float64{"p429": &s.mix.P429, "p500": &s.mix.P500, "delay_ms": &s.mix.Delay, "p_slow": &s.mix.PSlow, "slow_ms": &s.mix.SlowMS} {
		if v := q.Get(key); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 {
				s.mu.Unlock()
				http.Error(w, fmt.Sprintf("bad %s: %q", key, v), http.StatusBadRequest)
				return
			}
			*dst = f
		}
	}
	mix := s.mix
	s.mu.Unlock()
	w.Header().Set("content-type", "application/json")
	json.NewEncoder(w).Encode(mix)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:18080", "address to listen on")
	key := flag.String("key", "", "API key required as `Authorization: Bearer KEY` on chat calls (empty: none)")
	p429 := flag.Float64("p429", 0, "probability of a 429 on each attempt")
	p500 := flag.Float64("p500", 0, "probability of a 500 on each attempt")
	delay := flag.Float64("delay-ms", 0, "delay before every answer, in milliseconds")
	deltas := flag.Int("stream-deltas", 20, "content deltas per streamed reply")
	gap := flag.Float64("stream-gap-ms", 1, "wait between two deltas of a streamed reply, in milliseconds")
	flag.Parse()

	s := &server{key: *key, mix: faults{P429: *p429, P500: *p500, Delay: *delay}, shape: streamShape{Deltas: max(*deltas, 1), GapMS: *gap}}
	s.since.Store(time.Now().UnixNano())
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.handleChat)
	mux.HandleFunc("/search", s.handleSearch)
	mux.HandleFunc("/_stats", s.handleStats)
	mux.HandleFunc("/_faults", s.handleFaults)
	mux.HandleFunc("/_stream", s.handleStream)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("upstream listening on %s", ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	log.Fatal(srv.Serve(ln))
}
