package sidecar

// Build cases of the conformance suite (tests/conformance/README.md, "A Build
// case"): the request this package's builders make of a language-neutral
// description, compared with the case's as protos. Nothing is called.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

type buildSpec struct {
	Messages []map[string]json.RawMessage `json:"messages"`
	Options  map[string]any               `json:"options"`
}

type sourceSpec struct {
	Data      *string `json:"data"`
	URL       *string `json:"url"`
	File      *string `json:"file"`
	Text      *string `json:"text"`
	MediaType string  `json:"media_type"`
	Detail    string  `json:"detail"`
	Title     string  `json:"title"`
	Cache     any     `json:"cache"`
}

type resultSpec struct {
	Call    json.RawMessage `json:"call"`
	Content *string         `json:"content"`
	IsError bool            `json:"is_error"`
	Outcome json.RawMessage `json:"outcome"`
	Images  []sourceSpec    `json:"images"`
}

var details = map[string]sidecarv1.ImageDetail{
	"auto": sidecarv1.ImageDetail_IMAGE_DETAIL_AUTO, "low": sidecarv1.ImageDetail_IMAGE_DETAIL_LOW,
	"high": sidecarv1.ImageDetail_IMAGE_DETAIL_HIGH,
}

var efforts = map[string]sidecarv1.ReasoningEffort{
	"minimal": sidecarv1.ReasoningEffort_REASONING_EFFORT_MINIMAL, "low": sidecarv1.ReasoningEffort_REASONING_EFFORT_LOW,
	"medium": sidecarv1.ReasoningEffort_REASONING_EFFORT_MEDIUM, "high": sidecarv1.ReasoningEffort_REASONING_EFFORT_HIGH,
}

// cacheTTL is a neutral cache (true, "5m", "1h") as a TTL; ok false when none is given.
func cacheTTL(v any) (sidecarv1.CacheTtl, bool) {
	switch v {
	case true:
		return sidecarv1.CacheTtl_CACHE_TTL_UNSPECIFIED, true
	case "5m":
		return sidecarv1.CacheTtl_CACHE_TTL_5M, true
	case "1h":
		return sidecarv1.CacheTtl_CACHE_TTL_1H, true
	}
	return 0, false
}

// observeBuild builds the case's request: {"request": <its JSON>}, or
// {"refused": <the builder's error>}.
func observeBuild(base, build json.RawMessage, casesDir string) (map[string]any, error) {
	req := &sidecarv1.CallModelRequest{}
	if err := protojson.Unmarshal(base, req); err != nil {
		return nil, err
	}
	var spec buildSpec
	if err := json.Unmarshal(build, &spec); err != nil {
		return nil, err
	}
	files := filepath.Join(casesDir, "files")
	for _, step := range spec.Messages {
		msg, err := buildStep(step, files)
		if err != nil {
			if _, refused := err.(refusal); refused {
				return map[string]any{"refused": err.Error()}, nil
			}
			return nil, err
		}
		req.Messages = append(req.Messages, msg)
	}
	if err := applyOptions(req, spec.Options); err != nil {
		return map[string]any{"refused": err.Error()}, nil
	}
	raw, err := protojson.Marshal(req)
	if err != nil {
		return nil, err
	}
	var request any
	if err := json.Unmarshal(raw, &request); err != nil {
		return nil, err
	}
	return map[string]any{"request": request}, nil
}

// refusal is a builder's own error (the case may expect it), not the runner's.
type refusal struct{ error }

func buildStep(step map[string]json.RawMessage, files string) (*sidecarv1.Message, error) {
	if raw, ok := step["assistant"]; ok {
		reply := &sidecarv1.CallModelResponse{}
		if err := protojson.Unmarshal(raw, reply); err != nil {
			return nil, err
		}
		return Assistant(reply.GetMessage()), nil
	}
	if raw, ok := step["tool_results"]; ok {
		var specs []resultSpec
		if err := json.Unmarshal(raw, &specs); err != nil {
			return nil, err
		}
		var results []*sidecarv1.ToolCallResult
		for _, r := range specs {
			result, err := buildResult(r, files)
			if err != nil {
				return nil, err
			}
			results = append(results, result)
		}
		return ToolResults(results...), nil
	}
	var text string
	var images, documents []sourceSpec
	var parts []map[string]json.RawMessage
	var cache any
	for key, into := range map[string]any{"user": &text, "images": &images, "documents": &documents, "parts": &parts, "cache": &cache} {
		if raw, ok := step[key]; ok {
			if err := json.Unmarshal(raw, into); err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	var opts []ContentOption
	for _, s := range documents {
		opt, err := documentOption(s, files)
		if err != nil {
			return nil, err
		}
		opts = append(opts, opt)
	}
	for _, s := range images {
		opt, err := imageOption(s, files)
		if err != nil {
			return nil, err
		}
		opts = append(opts, opt)
	}
	for _, p := range parts {
		part, err := buildPart(p, files)
		if err != nil {
			return nil, err
		}
		opts = append(opts, WithParts(part))
	}
	if ttl, ok := cacheTTL(cache); ok {
		opts = append(opts, WithCache(ttl))
	}
	msg, err := User(text, opts...)
	if err != nil {
		return nil, refusal{err}
	}
	return msg, nil
}

func decodeData(s sourceSpec) ([]byte, error) {
	return base64.StdEncoding.DecodeString(*s.Data)
}

// imageOption is the option a neutral image becomes: WithImageFile / WithImage / WithImageURL
// when the source is all it says, else WithImagePart of the part with its detail and cache.
func imageOption(s sourceSpec, files string) (ContentOption, error) {
	plain := s.MediaType == "" && s.Detail == "" && s.Cache == nil
	if plain {
		switch {
		case s.File != nil:
			return WithImageFile(filepath.Join(files, *s.File)), nil
		case s.URL != nil:
			return WithImageURL(*s.URL), nil
		}
		data, err := decodeData(s)
		return WithImage(data, ""), err
	}
	part, err := imagePartOf(s, files)
	if err != nil {
		return nil, err
	}
	return WithImagePart(part), nil
}

func imagePartOf(s sourceSpec, files string) (*sidecarv1.Part, error) {
	var part *sidecarv1.Part
	var err error
	switch {
	case s.File != nil:
		part, err = ImageFilePart(filepath.Join(files, *s.File))
	case s.URL != nil:
		part = ImageURLPart(*s.URL)
		part.GetImage().MediaType = s.MediaType
	default:
		var data []byte
		if data, err = decodeData(s); err != nil {
			return nil, err
		}
		part, err = ImagePart(data, s.MediaType)
	}
	if err != nil {
		return nil, refusal{err}
	}
	if s.Detail != "" {
		part.GetImage().Detail = details[s.Detail]
	}
	if ttl, ok := cacheTTL(s.Cache); ok {
		Cached(part, ttl)
	}
	return part, nil
}

func documentOption(s sourceSpec, files string) (ContentOption, error) {
	if s.MediaType == "" && s.Title == "" && s.Cache == nil {
		switch {
		case s.File != nil:
			return WithDocumentFile(filepath.Join(files, *s.File)), nil
		case s.URL != nil:
			return WithDocumentURL(*s.URL), nil
		case s.Text != nil:
			return WithTextDocument(*s.Text, ""), nil
		}
		data, err := decodeData(s)
		return WithDocument(data, ""), err
	}
	part, err := documentPartOf(s, files)
	if err != nil {
		return nil, err
	}
	return WithDocumentPart(part), nil
}

func documentPartOf(s sourceSpec, files string) (*sidecarv1.Part, error) {
	var part *sidecarv1.Part
	var err error
	switch {
	case s.Text != nil:
		part = TextDocumentPart(*s.Text, s.Title)
	case s.File != nil:
		part, err = DocumentFilePart(filepath.Join(files, *s.File))
	case s.URL != nil:
		part = DocumentURLPart(*s.URL)
		part.GetDocument().MediaType = s.MediaType
	default:
		var data []byte
		if data, err = decodeData(s); err != nil {
			return nil, err
		}
		part, err = DocumentPart(data, s.MediaType)
	}
	if err != nil {
		return nil, refusal{err}
	}
	part.GetDocument().Title = s.Title
	if ttl, ok := cacheTTL(s.Cache); ok {
		Cached(part, ttl)
	}
	return part, nil
}

func buildPart(p map[string]json.RawMessage, files string) (*sidecarv1.Part, error) {
	for key, build := range map[string]func(sourceSpec, string) (*sidecarv1.Part, error){"image": imagePartOf, "document": documentPartOf} {
		if raw, ok := p[key]; ok {
			var s sourceSpec
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, err
			}
			return build(s, files)
		}
	}
	var text string
	var cache any
	if err := json.Unmarshal(p["text"], &text); err != nil {
		return nil, err
	}
	if raw, ok := p["cache"]; ok {
		if err := json.Unmarshal(raw, &cache); err != nil {
			return nil, err
		}
	}
	part := TextPart(text)
	if ttl, ok := cacheTTL(cache); ok {
		Cached(part, ttl)
	}
	return part, nil
}

func buildResult(r resultSpec, files string) (*sidecarv1.ToolCallResult, error) {
	call := &sidecarv1.ToolCall{}
	if err := protojson.Unmarshal(r.Call, call); err != nil {
		return nil, err
	}
	var opts []ContentOption
	for _, s := range r.Images {
		opt, err := imageOption(s, files)
		if err != nil {
			return nil, err
		}
		opts = append(opts, opt)
	}
	var result *sidecarv1.ToolCallResult
	var err error
	if r.Outcome != nil {
		resp := &sidecarv1.ExecuteToolResponse{}
		if err := protojson.Unmarshal(r.Outcome, resp); err != nil {
			return nil, err
		}
		outcome := newToolOutcome(&sidecarv1.ExecuteToolRequest{Tool: call.GetName(), CallId: call.GetId()}, resp)
		result, err = outcome.ToolCallResultWith(opts...)
	} else {
		result, err = ToolResult(call, *r.Content, r.IsError, opts...)
	}
	if err != nil {
		return nil, refusal{err}
	}
	return result, nil
}

// applyOptions sets the neutral options through this package's helpers and the
// generated fields (proto.Float64 ...), as a Go caller does.
func applyOptions(req *sidecarv1.CallModelRequest, options map[string]any) error {
	keys := make([]string, 0, len(options))
	for k := range options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		v := options[key]
		switch key {
		case "reasoning":
			if effort, ok := v.(string); ok {
				req.Reasoning = ReasoningEffort(efforts[effort])
			} else {
				req.Reasoning = ReasoningBudget(uint32(v.(float64)))
			}
		case "tool_choice":
			req.ToolChoice = ToolChoice(v.(string))
		case "parallel_tool_calls":
			req.ParallelToolCalls = proto.Bool(v.(bool))
		case "stop":
			for _, s := range v.([]any) {
				req.Stop = append(req.Stop, s.(string))
			}
		case "top_p":
			req.TopP = proto.Float64(v.(float64))
		case "top_k":
			req.TopK = proto.Uint32(uint32(v.(float64)))
		case "seed":
			req.Seed = proto.Int64(int64(v.(float64)))
		case "presence_penalty":
			req.PresencePenalty = proto.Float64(v.(float64))
		case "frequency_penalty":
			req.FrequencyPenalty = proto.Float64(v.(float64))
		case "end_user":
			req.EndUser = v.(string)
		case "system_cache":
			ttl, _ := cacheTTL(v)
			req.SystemCache = CacheBreakpoint(ttl)
		case "provider_options":
			options, err := ProviderOptions(v.(map[string]any))
			if err != nil {
				return err
			}
			req.ProviderOptionsJson = options
		default:
			return fmt.Errorf("unknown option %q", key)
		}
	}
	return nil
}

// checkBuild compares the request built with the case's, as protos; each
// differing field is named by its path.
func checkBuild(expect, observed map[string]any) []string {
	if refused, _ := expect["refused"].(bool); refused {
		if observed["refused"] == nil {
			return []string{"refused: want the builder to refuse, it built a request"}
		}
		return nil
	}
	if why, ok := observed["refused"]; ok {
		return []string{fmt.Sprintf("request: the builder refused: %v", why)}
	}
	want, err := requestOf(expect["request"])
	if err != nil {
		return []string{"expect.request: " + err.Error()}
	}
	got, err := requestOf(observed["request"])
	if err != nil {
		return []string{"request: " + err.Error()}
	}
	if proto.Equal(want, got) {
		return nil
	}
	var w, g any
	wj, _ := protojson.Marshal(want)
	gj, _ := protojson.Marshal(got)
	_ = json.Unmarshal(wj, &w)
	_ = json.Unmarshal(gj, &g)
	problems := differences("request", w, g)
	if len(problems) == 0 {
		problems = []string{"request: the protos differ"}
	}
	return problems
}

func requestOf(v any) (*sidecarv1.CallModelRequest, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	req := &sidecarv1.CallModelRequest{}
	return req, protojson.Unmarshal(raw, req)
}

func differences(at string, want, got any) []string {
	w, wok := want.(map[string]any)
	g, gok := got.(map[string]any)
	if wok && gok {
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		var out []string
		for _, k := range sorted {
			out = append(out, differences(at+"."+k, w[k], g[k])...)
		}
		return out
	}
	wl, wok := want.([]any)
	gl, gok := got.([]any)
	if wok && gok && len(wl) == len(gl) {
		var out []string
		for i := range wl {
			out = append(out, differences(fmt.Sprintf("%s[%d]", at, i), wl[i], gl[i])...)
		}
		return out
	}
	wj, _ := json.Marshal(want)
	gj, _ := json.Marshal(got)
	if string(wj) != string(gj) {
		return []string{fmt.Sprintf("%s: want %s, got %s", at, wj, gj)}
	}
	return nil
}
