package sidecar

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

var (
	testPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	testPDF = []byte("%PDF-1.4\n%%EOF\n")
)

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func kinds(parts []*sidecarv1.Part) []string {
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		switch p.GetKind().(type) {
		case *sidecarv1.Part_Text:
			out = append(out, "text")
		case *sidecarv1.Part_Image:
			out = append(out, "image")
		case *sidecarv1.Part_Document:
			out = append(out, "document")
		}
	}
	return out
}

func TestATextTurnIsStillPlainText(t *testing.T) {
	msg, err := User("hi")
	if err != nil || !proto.Equal(msg, &sidecarv1.Message{Role: sidecarv1.Role_ROLE_USER, Text: "hi"}) {
		t.Fatalf("User(hi) = %v, %v", msg, err)
	}
}

func TestAnImageFileBecomesAnImagePartBeforeTheQuestion(t *testing.T) {
	msg, err := User("what is this?", WithImageFile(writeFile(t, "shot.png", testPNG)))
	if err != nil {
		t.Fatal(err)
	}
	if msg.GetText() != "" || strings.Join(kinds(msg.GetParts()), ",") != "image,text" {
		t.Fatalf("message = %v", msg)
	}
	image := msg.GetParts()[0].GetImage()
	if string(image.GetData()) != string(testPNG) || image.GetMediaType() != "image/png" || msg.GetParts()[1].GetText() != "what is this?" {
		t.Errorf("parts = %v", msg.GetParts())
	}
}

func TestMediaTypesFromTheBytesThenTheSuffix(t *testing.T) {
	for data, want := range map[string]string{
		"\xff\xd8\xff\xe0....": "image/jpeg", "GIF89a..": "image/gif", "RIFF\x00\x00\x00\x00WEBPVP8 ": "image/webp",
		string(testPNG): "image/png", string(testPDF): MediaTypePDF, "plain": "",
	} {
		if got := MediaTypeOf([]byte(data)); got != want {
			t.Errorf("MediaTypeOf(%q) = %q, want %q", data, got, want)
		}
	}
	p, err := ImageFilePart(writeFile(t, "odd.webp", []byte{0, 1}))
	if err != nil || p.GetImage().GetMediaType() != "image/webp" {
		t.Errorf("odd.webp: %v, %v", p, err)
	}
	if _, err := ImagePart([]byte("not an image"), ""); err == nil || !strings.Contains(err.Error(), "give its media type") {
		t.Errorf("unknown bytes: %v", err)
	}
	if _, err := User("what?", WithImageFile(writeFile(t, "notes.bin", []byte("x")))); err == nil {
		t.Error("an image file nothing types was accepted")
	}
	if _, err := User("what?", WithImageFile(filepath.Join(t.TempDir(), "missing.png"))); err == nil {
		t.Error("a missing file was accepted")
	}
}

func TestDocumentsComeBeforeImagesAndTheCacheMarksTheLastPart(t *testing.T) {
	pdf := writeFile(t, "report.pdf", testPDF)
	notes := writeFile(t, "notes.md", []byte("# notes"))
	msg, err := User("look",
		WithImage(testPNG, ""), WithImageURL("https://example.com/a.png"),
		WithDocumentFile(pdf), WithDocument(testPDF, ""), WithDocumentURL("https://example.com/r.pdf"),
		WithDocumentFile(notes), WithTextDocument("a b", "ab"),
		WithParts(Cached(TextPart("context"), sidecarv1.CacheTtl_CACHE_TTL_5M)),
		WithCache(sidecarv1.CacheTtl_CACHE_TTL_1H))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(kinds(msg.GetParts()), ","); got != "document,document,document,document,document,image,image,text,text" {
		t.Fatalf("kinds = %s", got)
	}
	parts := msg.GetParts()
	want := []*sidecarv1.DocumentPart{
		{Source: &sidecarv1.DocumentPart_Data{Data: testPDF}, MediaType: MediaTypePDF},
		{Source: &sidecarv1.DocumentPart_Data{Data: testPDF}, MediaType: MediaTypePDF},
		{Source: &sidecarv1.DocumentPart_Url{Url: "https://example.com/r.pdf"}},
		{Source: &sidecarv1.DocumentPart_Text{Text: "# notes"}, MediaType: MediaTypeText},
		{Source: &sidecarv1.DocumentPart_Text{Text: "a b"}, MediaType: MediaTypeText, Title: "ab"},
	}
	for i, w := range want {
		if !proto.Equal(parts[i].GetDocument(), w) {
			t.Errorf("parts[%d] = %v, want %v", i, parts[i].GetDocument(), w)
		}
	}
	if parts[7].GetCache().GetTtl() != sidecarv1.CacheTtl_CACHE_TTL_5M || parts[8].GetCache().GetTtl() != sidecarv1.CacheTtl_CACHE_TTL_1H {
		t.Errorf("caches = %v, %v", parts[7].GetCache(), parts[8].GetCache())
	}
	for _, p := range parts[:7] {
		if p.GetCache() != nil {
			t.Errorf("an uncached part has a breakpoint: %v", p)
		}
	}
	if _, err := DocumentPart([]byte("plain"), ""); err == nil {
		t.Error("bytes that are no PDF were taken for one")
	}
}

func TestAReplyGoesBackWithItsReasoningByteIdentical(t *testing.T) {
	reply := &sidecarv1.Message{
		Role: sidecarv1.Role_ROLE_ASSISTANT, Text: "checking",
		ToolCalls: []*sidecarv1.ToolCall{{Id: "toolu_1", Name: "get_weather", ArgumentsJson: `{"city": "Paris"}`}},
		Reasoning: []*sidecarv1.ReasoningPart{
			{Text: "Let me think…\n", Signature: "EqQBCgIYAhIM+/=", Format: "anthropic"},
			{RedactedData: "EmwKAhgBEgy3va3pzix/LafPsn4a", Format: "anthropic"},
		},
	}
	turn := Assistant(reply)
	a, _ := proto.MarshalOptions{Deterministic: true}.Marshal(turn)
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(reply)
	if string(a) != string(b) {
		t.Errorf("Assistant(reply) = %v, want %v", turn, reply)
	}
	turn.Reasoning[0].Signature = "changed"
	if reply.GetReasoning()[0].GetSignature() != "EqQBCgIYAhIM+/=" {
		t.Error("Assistant shares the reply's reasoning instead of copying it")
	}
}

func TestAToolResultCarriesImagesAfterItsText(t *testing.T) {
	call := &sidecarv1.ToolCall{Id: "call_1", Name: "screenshot"}
	shot, err := ToolResult(call, "the page", false, WithImage(testPNG, ""))
	if err != nil {
		t.Fatal(err)
	}
	if shot.GetContent() != "" || strings.Join(kinds(shot.GetParts()), ",") != "text,image" || shot.GetParts()[0].GetText() != "the page" {
		t.Errorf("result = %v", shot)
	}
	plain, _ := ToolResult(call, "done", true)
	if plain.GetContent() != "done" || !plain.GetIsError() || len(plain.GetParts()) != 0 {
		t.Errorf("plain = %v", plain)
	}
	outcome := &ToolOutcome{Response: &sidecarv1.ExecuteToolResponse{ModelText: "boom", Outcome: &sidecarv1.ExecuteToolResponse_Failure{
		Failure: &sidecarv1.Failure{Kind: sidecarv1.FailureKind_FAILURE_KIND_EXTERNAL_SERVICE}}}, callID: "call_2", toolName: "fetch"}
	failed, err := outcome.ToolCallResultWith(WithImageURL("https://example.com/s.png"))
	if err != nil || !failed.GetIsError() || failed.GetCallId() != "call_2" || strings.Join(kinds(failed.GetParts()), ",") != "text,image" {
		t.Errorf("failed = %v, %v", failed, err)
	}
	if _, err := ToolResult(call, "x", false, WithDocument(testPDF, "")); err == nil {
		t.Error("a tool result took a document")
	}
	msg := ToolResults(shot, failed)
	if msg.GetRole() != sidecarv1.Role_ROLE_TOOL || len(msg.GetToolResults()) != 2 {
		t.Errorf("ToolResults = %v", msg)
	}
}

func TestRequestOptions(t *testing.T) {
	for choice, want := range map[string]*sidecarv1.ToolChoice{
		"auto":        {Mode: sidecarv1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO},
		"none":        {Mode: sidecarv1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE},
		"required":    {Mode: sidecarv1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED},
		"get_weather": {Mode: sidecarv1.ToolChoiceMode_TOOL_CHOICE_MODE_TOOL, Name: "get_weather"},
	} {
		if got := ToolChoice(choice); !proto.Equal(got, want) {
			t.Errorf("ToolChoice(%q) = %v", choice, got)
		}
	}
	if got := ReasoningBudget(2048); got.GetBudgetTokens() != 2048 {
		t.Errorf("ReasoningBudget = %v", got)
	}
	if got := ReasoningEffort(sidecarv1.ReasoningEffort_REASONING_EFFORT_HIGH); got.GetEffort() != sidecarv1.ReasoningEffort_REASONING_EFFORT_HIGH {
		t.Errorf("ReasoningEffort = %v", got)
	}
	options, err := ProviderOptions(map[string]any{"anthropic": map[string]any{"metadata": map[string]any{"user_id": "<u&1>"}}})
	if err != nil || options != `{"anthropic":{"metadata":{"user_id":"<u&1>"}}}` {
		t.Errorf("ProviderOptions = %s, %v", options, err)
	}
	if _, err := ProviderOptions(map[string]any{"openai": func() {}}); err == nil {
		t.Error("a value JSON cannot hold was accepted")
	}
	if got := CacheBreakpoint(sidecarv1.CacheTtl_CACHE_TTL_1H); got.GetTtl() != sidecarv1.CacheTtl_CACHE_TTL_1H {
		t.Errorf("CacheBreakpoint = %v", got)
	}
}
