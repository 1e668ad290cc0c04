package main

// The stream modes: a streamed chat reply read delta by delta, timed to its
// first delta (time to first token) and to its end.
//
//	http-stream  the upstream's OpenAI SSE directly: POST with "stream": true and
//	             stream_options.include_usage, read `data:` lines; the first with
//	             a non-empty delta.content is the first token; [DONE] ends it
//	grpc-stream  StreamModel through the Go client's stubs: the first text event
//	             is the first token; the final event, then the end, ends it

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

// streamBody is chatBody asking for a stream with the usage chunk, as the sidecar asks.
func streamBody(cfg *config) []byte {
	var body map[string]any
	_ = json.Unmarshal(chatBody(cfg), &body)
	body["stream"] = true
	body["stream_options"] = map[string]bool{"include_usage": true}
	data, _ := json.Marshal(body)
	return data
}

// sseChunk is the part of an OpenAI chat.completion.chunk the reader looks at.
type sseChunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

func newHTTPStreamCaller(cfg *config) (caller, string, func(), error) {
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
	headers.Set("content-type", "application/json")
	headers.Set("accept", "text/event-stream")
	body := streamBody(cfg)
	call := func(ctx context.Context) outcome {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.url, bytes.NewReader(body))
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
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			data, _ := io.ReadAll(resp.Body)
			return outcome{class: fmt.Sprintf("http %d", resp.StatusCode), detail: truncate(string(data), 300)}
		}
		return readSSE(resp.Body)
	}
	return call, "POST " + cfg.url + " (stream)", tr.CloseIdleConnections, nil
}

// readSSE reads an OpenAI chat stream to its [DONE], noting the first content delta.
func readSSE(body io.Reader) outcome {
	var o outcome
	deltas, finished := 0, false
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // blank lines end events; comments and other fields are skipped
		}
		data = bytes.TrimSpace(data)
		if bytes.Equal(data, []byte("[DONE]")) {
			if deltas == 0 || !finished {
				return outcome{class: "short stream", detail: fmt.Sprintf("%d deltas, finished %v", deltas, finished)}
			}
			o.ok = true
			return o
		}
		var chunk sseChunk
		if err := json.Unmarshal(data, &chunk); err != nil {
			return outcome{class: "bad chunk", detail: truncate(string(data), 300)}
		}
		for _, c := range chunk.Choices {
			if c.Delta.Content != "" {
				if deltas == 0 {
					o.first = time.Now()
				}
				deltas++
			}
			if c.FinishReason != nil {
				finished = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return outcome{class: transportClass(err), detail: err.Error()}
	}
	return outcome{class: "short stream", detail: fmt.Sprintf("no [DONE] after %d deltas", deltas)}
}

func newGRPCStreamCaller(cfg *config) (caller, string, func(), error) {
	pick, closeFn, err := dialSidecar(cfg)
	if err != nil {
		return nil, "", nil, err
	}
	req := &sidecarv1.CallModelRequest{
		Model:           cfg.model,
		System:          systemPrompt,
		Messages:        []*sidecarv1.Message{{Role: sidecarv1.Role_ROLE_USER, Text: userPrompt}},
		MaxOutputTokens: proto.Uint32(uint32(cfg.maxTokens)),
		Job:             &sidecarv1.Job{JobId: "bench", WorkflowId: "bench"},
	}
	call := func(ctx context.Context) outcome {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := pick().StreamModel(ctx, req)
		if err != nil {
			return grpcFailure(err)
		}
		var o outcome
		deltas, restarts := 0, 0
		var final *sidecarv1.CallModelResponse
		for {
			event, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return grpcFailure(err)
			}
			switch e := event.GetEvent().(type) {
			case *sidecarv1.StreamModelEvent_Text:
				if deltas == 0 && restarts == 0 {
					o.first = time.Now()
				}
				deltas++
			case *sidecarv1.StreamModelEvent_Restart:
				restarts++
			case *sidecarv1.StreamModelEvent_Final:
				final = e.Final
			}
		}
		if final == nil || deltas == 0 {
			return outcome{class: "short stream", detail: fmt.Sprintf("%d deltas, final %v", deltas, final != nil)}
		}
		o.ok, o.attempts = true, int(final.GetAttempts())
		return o
	}
	return call, "grpc " + cfg.target + " StreamModel", closeFn, nil
}
