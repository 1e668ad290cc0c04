package sidecar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

// Media types the builders set.
const (
	MediaTypePDF  = "application/pdf"
	MediaTypeText = "text/plain"
)

var imageSuffixes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
}

var textSuffixes = []string{".txt", ".text", ".md", ".markdown"}

// MediaTypeOf is the media type the bytes' signature says (PNG, JPEG, GIF,
// WebP, PDF); "" when none.
func MediaTypeOf(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(data, []byte{0xff, 0xd8, 0xff}):
		return "image/jpeg"
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return "image/gif"
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return "image/webp"
	case bytes.HasPrefix(data, []byte("%PDF-")):
		return MediaTypePDF
	}
	return ""
}

// TextPart is a text part.
func TextPart(text string) *sidecarv1.Part {
	return &sidecarv1.Part{Kind: &sidecarv1.Part_Text{Text: text}}
}

// ImagePart is an inline image. An empty mediaType is read from the bytes'
// signature (PNG, JPEG, GIF, WebP); bytes it does not know are an error, never
// sent untyped.
func ImagePart(data []byte, mediaType string) (*sidecarv1.Part, error) {
	if mediaType == "" {
		mediaType = MediaTypeOf(data)
		if !strings.HasPrefix(mediaType, "image/") {
			return nil, errors.New("sidecar: the image's bytes are no PNG, JPEG, GIF or WebP; give its media type")
		}
	}
	return imagePart(&sidecarv1.ImagePart{Source: &sidecarv1.ImagePart_Data{Data: data}, MediaType: mediaType}), nil
}

// ImageURLPart is an image the provider fetches: an https, http or data: URL.
func ImageURLPart(url string) *sidecarv1.Part {
	return imagePart(&sidecarv1.ImagePart{Source: &sidecarv1.ImagePart_Url{Url: url}})
}

// ImageFilePart is the image in a file: its bytes, the media type from their
// signature or else the file's suffix.
func ImageFilePart(path string) (*sidecarv1.Part, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sidecar: image: %w", err)
	}
	mediaType := MediaTypeOf(data)
	if !strings.HasPrefix(mediaType, "image/") {
		mediaType = imageSuffixes[strings.ToLower(filepath.Ext(path))]
	}
	if mediaType == "" {
		return nil, fmt.Errorf("sidecar: image %q is no PNG, JPEG, GIF or WebP; use ImagePart with its media type", path)
	}
	return ImagePart(data, mediaType)
}

// DocumentPart is an inline document. An empty mediaType is application/pdf
// when the bytes are a PDF (an error otherwise); text/plain makes it a text
// document of the bytes (UTF-8).
func DocumentPart(data []byte, mediaType string) (*sidecarv1.Part, error) {
	switch {
	case mediaType == MediaTypeText:
		if !utf8.Valid(data) {
			return nil, errors.New("sidecar: a text document is UTF-8")
		}
		return TextDocumentPart(string(data), ""), nil
	case mediaType == "" && MediaTypeOf(data) != MediaTypePDF:
		return nil, errors.New("sidecar: the document's bytes are no PDF; give its media type, or use TextDocumentPart")
	case mediaType == "":
		mediaType = MediaTypePDF
	}
	return documentPart(&sidecarv1.DocumentPart{Source: &sidecarv1.DocumentPart_Data{Data: data}, MediaType: mediaType}), nil
}

// DocumentURLPart is a PDF the provider fetches, by its https URL.
func DocumentURLPart(url string) *sidecarv1.Part {
	return documentPart(&sidecarv1.DocumentPart{Source: &sidecarv1.DocumentPart_Url{Url: url}})
}

// TextDocumentPart is a plain-text document with a title the model may cite ("" for none).
func TextDocumentPart(text, title string) *sidecarv1.Part {
	return documentPart(&sidecarv1.DocumentPart{
		Source: &sidecarv1.DocumentPart_Text{Text: text}, MediaType: MediaTypeText, Title: title,
	})
}

// DocumentFilePart is the document in a file: a PDF (by its signature or a
// .pdf suffix), or a text document (.txt, .text, .md, .markdown).
func DocumentFilePart(path string) (*sidecarv1.Part, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sidecar: document: %w", err)
	}
	suffix := strings.ToLower(filepath.Ext(path))
	switch {
	case MediaTypeOf(data) == MediaTypePDF || suffix == ".pdf":
		return DocumentPart(data, MediaTypePDF)
	case slices.Contains(textSuffixes, suffix):
		return DocumentPart(data, MediaTypeText)
	}
	return nil, fmt.Errorf("sidecar: document %q is no PDF and no text file (%s); use DocumentPart with its media type",
		path, strings.Join(textSuffixes, ", "))
}

// Cached marks p as a cache breakpoint (the prompt up to and including it),
// living ttl (CACHE_TTL_UNSPECIFIED: the provider's default), and returns it.
func Cached(p *sidecarv1.Part, ttl sidecarv1.CacheTtl) *sidecarv1.Part {
	p.Cache = &sidecarv1.CacheBreakpoint{Ttl: ttl}
	return p
}

func imagePart(i *sidecarv1.ImagePart) *sidecarv1.Part {
	return &sidecarv1.Part{Kind: &sidecarv1.Part_Image{Image: i}}
}

func documentPart(d *sidecarv1.DocumentPart) *sidecarv1.Part {
	return &sidecarv1.Part{Kind: &sidecarv1.Part_Document{Document: d}}
}

// ---------------------------------------------------------------- messages

// content is what a User or ToolResult option adds to.
type content struct {
	documents, images, parts []*sidecarv1.Part
	cache                    *sidecarv1.CacheBreakpoint
	err                      error
}

// ContentOption adds an image, a document, parts or a cache breakpoint to a
// User message (images only to a ToolResult).
type ContentOption func(*content)

func (c *content) add(to *[]*sidecarv1.Part, p *sidecarv1.Part, err error) {
	if err != nil {
		c.err = errors.Join(c.err, err)
		return
	}
	*to = append(*to, p)
}

// WithImage adds an inline image (mediaType "": read from the bytes).
func WithImage(data []byte, mediaType string) ContentOption {
	return func(c *content) { p, err := ImagePart(data, mediaType); c.add(&c.images, p, err) }
}

// WithImageURL adds an image by URL.
func WithImageURL(url string) ContentOption {
	return func(c *content) { c.add(&c.images, ImageURLPart(url), nil) }
}

// WithImageFile adds the image in a file.
func WithImageFile(path string) ContentOption {
	return func(c *content) { p, err := ImageFilePart(path); c.add(&c.images, p, err) }
}

// WithImagePart adds an image part as it is (ImagePart, ImageFilePart...
// with a detail or a cache breakpoint set), among the images.
func WithImagePart(p *sidecarv1.Part) ContentOption {
	return func(c *content) {
		if p.GetImage() == nil {
			c.err = errors.Join(c.err, errors.New("sidecar: WithImagePart: not an image part"))
			return
		}
		c.add(&c.images, p, nil)
	}
}

// WithDocument adds an inline document (mediaType "": a PDF).
func WithDocument(data []byte, mediaType string) ContentOption {
	return func(c *content) { p, err := DocumentPart(data, mediaType); c.add(&c.documents, p, err) }
}

// WithDocumentURL adds a PDF by URL.
func WithDocumentURL(url string) ContentOption {
	return func(c *content) { c.add(&c.documents, DocumentURLPart(url), nil) }
}

// WithDocumentFile adds the document in a file (a PDF or a text file).
func WithDocumentFile(path string) ContentOption {
	return func(c *content) { p, err := DocumentFilePart(path); c.add(&c.documents, p, err) }
}

// WithTextDocument adds a plain-text document with its title.
func WithTextDocument(text, title string) ContentOption {
	return func(c *content) { c.add(&c.documents, TextDocumentPart(text, title), nil) }
}

// WithDocumentPart adds a document part as it is (DocumentFilePart... with a
// title or a cache breakpoint set), among the documents.
func WithDocumentPart(p *sidecarv1.Part) ContentOption {
	return func(c *content) {
		if p.GetDocument() == nil {
			c.err = errors.Join(c.err, errors.New("sidecar: WithDocumentPart: not a document part"))
			return
		}
		c.add(&c.documents, p, nil)
	}
}

// WithParts adds parts as they are, after the documents and images.
func WithParts(parts ...*sidecarv1.Part) ContentOption {
	return func(c *content) { c.parts = append(c.parts, parts...) }
}

// WithCache makes the message's last part a cache breakpoint living ttl.
func WithCache(ttl sidecarv1.CacheTtl) ContentOption {
	return func(c *content) { c.cache = &sidecarv1.CacheBreakpoint{Ttl: ttl} }
}

// User is a user turn: text alone, or, with options, ordered parts: the
// documents, the images, the parts given, then the text (media before the
// question about it, as the providers advise). A file that cannot be read or
// bytes whose media type nothing tells are an error, before anything is sent.
//
//	msg, err := sidecar.User("what is this?", sidecar.WithImageFile("shot.png"))
func User(text string, opts ...ContentOption) (*sidecarv1.Message, error) {
	var c content
	for _, opt := range opts {
		opt(&c)
	}
	if c.err != nil {
		return nil, c.err
	}
	parts := append(append(c.documents, c.images...), c.parts...)
	if len(parts) == 0 && c.cache == nil {
		return &sidecarv1.Message{Role: sidecarv1.Role_ROLE_USER, Text: text}, nil
	}
	if text != "" {
		parts = append(parts, TextPart(text))
	}
	if c.cache != nil && len(parts) > 0 {
		last := proto.Clone(parts[len(parts)-1]).(*sidecarv1.Part)
		last.Cache = c.cache
		parts[len(parts)-1] = last
	}
	return &sidecarv1.Message{Role: sidecarv1.Role_ROLE_USER, Parts: parts}, nil
}

// Assistant is the model's reply (a CallModelResponse's message), ready to
// append to the conversation: its text, tool calls and reasoning exactly as
// they came (byte-identical: the provider verifies the reasoning's signature).
//
//	msgs = append(msgs, sidecar.Assistant(reply.GetMessage()))
func Assistant(reply *sidecarv1.Message) *sidecarv1.Message {
	msg := &sidecarv1.Message{Role: sidecarv1.Role_ROLE_ASSISTANT, Text: reply.GetText()}
	for _, c := range reply.GetToolCalls() {
		msg.ToolCalls = append(msg.ToolCalls, proto.Clone(c).(*sidecarv1.ToolCall))
	}
	for _, p := range reply.GetParts() {
		msg.Parts = append(msg.Parts, proto.Clone(p).(*sidecarv1.Part))
	}
	for _, r := range reply.GetReasoning() {
		msg.Reasoning = append(msg.Reasoning, proto.Clone(r).(*sidecarv1.ReasoningPart))
	}
	return msg
}

// ToolResult is the outcome of an agent's own tool for the model: content
// (the text) and, with image options (WithImage, WithImageURL, WithImageFile,
// WithParts of images), parts: the text, then the images.
func ToolResult(call *sidecarv1.ToolCall, content string, isError bool, opts ...ContentOption) (*sidecarv1.ToolCallResult, error) {
	result := &sidecarv1.ToolCallResult{CallId: call.GetId(), Name: call.GetName(), IsError: isError}
	return result, withImages(result, content, opts)
}

// ToolCallResultWith is the outcome as a ToolCallResult (see
// ToolOutcome.ToolCallResult) carrying images after its text.
func (o *ToolOutcome) ToolCallResultWith(opts ...ContentOption) (*sidecarv1.ToolCallResult, error) {
	result := &sidecarv1.ToolCallResult{CallId: o.callID, Name: o.toolName, IsError: o.IsError()}
	return result, withImages(result, o.ModelText(), opts)
}

func withImages(result *sidecarv1.ToolCallResult, text string, opts []ContentOption) error {
	var c content
	for _, opt := range opts {
		opt(&c)
	}
	if c.err != nil {
		return c.err
	}
	if len(c.documents) > 0 || c.cache != nil {
		return errors.New("sidecar: a tool result carries text and images only")
	}
	images := append(c.images, c.parts...)
	if len(images) == 0 {
		result.Content = text
		return nil
	}
	if text != "" {
		result.Parts = append(result.Parts, TextPart(text))
	}
	result.Parts = append(result.Parts, images...)
	return nil
}

// ToolResults is one ROLE_TOOL message handing results back (ToolMessage
// does the same for ToolOutcomes).
func ToolResults(results ...*sidecarv1.ToolCallResult) *sidecarv1.Message {
	return &sidecarv1.Message{Role: sidecarv1.Role_ROLE_TOOL, ToolResults: results}
}

// ---------------------------------------------------------------- request options

// ReasoningEffort is a request's Reasoning as a level.
func ReasoningEffort(effort sidecarv1.ReasoningEffort) *sidecarv1.Reasoning {
	return &sidecarv1.Reasoning{Amount: &sidecarv1.Reasoning_Effort{Effort: effort}}
}

// ReasoningBudget is a request's Reasoning as a token budget.
func ReasoningBudget(tokens uint32) *sidecarv1.Reasoning {
	return &sidecarv1.Reasoning{Amount: &sidecarv1.Reasoning_BudgetTokens{BudgetTokens: tokens}}
}

// ToolChoice is a request's ToolChoice: "auto", "none", "required", or the
// name of the tool the model must call.
func ToolChoice(choice string) *sidecarv1.ToolChoice {
	switch choice {
	case "auto":
		return &sidecarv1.ToolChoice{Mode: sidecarv1.ToolChoiceMode_TOOL_CHOICE_MODE_AUTO}
	case "none":
		return &sidecarv1.ToolChoice{Mode: sidecarv1.ToolChoiceMode_TOOL_CHOICE_MODE_NONE}
	case "required":
		return &sidecarv1.ToolChoice{Mode: sidecarv1.ToolChoiceMode_TOOL_CHOICE_MODE_REQUIRED}
	}
	return &sidecarv1.ToolChoice{Mode: sidecarv1.ToolChoiceMode_TOOL_CHOICE_MODE_TOOL, Name: choice}
}

// CacheBreakpoint is a breakpoint living ttl, e.g. for a request's SystemCache.
func CacheBreakpoint(ttl sidecarv1.CacheTtl) *sidecarv1.CacheBreakpoint {
	return &sidecarv1.CacheBreakpoint{Ttl: ttl}
}

// ProviderOptions is a request's ProviderOptionsJson: {"<wire format>": {...}},
// merged into that format's upstream body, as compact JSON.
func ProviderOptions(options map[string]any) (string, error) {
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(options); err != nil {
		return "", fmt.Errorf("sidecar: provider options: %w", err)
	}
	return strings.TrimSuffix(out.String(), "\n"), nil
}
