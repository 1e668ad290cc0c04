package sidecar

import (
	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

// ToolOutcome is the outcome of one ExecuteTool call: a result or a failure.
// Either way ModelText is exactly what goes back to the model.
type ToolOutcome struct {
	// Response is the sidecar's answer as received.
	Response *sidecarv1.ExecuteToolResponse
	callID   string
	toolName string
}

func newToolOutcome(req *sidecarv1.ExecuteToolRequest, resp *sidecarv1.ExecuteToolResponse) *ToolOutcome {
	callID := resp.GetCallId()
	if callID == "" {
		callID = req.GetCallId()
	}
	return &ToolOutcome{Response: resp, callID: callID, toolName: req.GetTool()}
}

// CallID is the model's tool-call id the outcome answers.
func (o *ToolOutcome) CallID() string { return o.callID }

// ToolName is the tool that ran.
func (o *ToolOutcome) ToolName() string { return o.toolName }

// ModelText is what the agent hands back to the model: the result's content,
// or the failure's explanation.
func (o *ToolOutcome) ModelText() string { return o.Response.GetModelText() }

// IsError reports whether the tool failed.
func (o *ToolOutcome) IsError() bool { return o.Response.GetFailure() != nil }

// Result is the tool's answer; nil when it failed.
func (o *ToolOutcome) Result() *sidecarv1.ToolResult { return o.Response.GetResult() }

// Err is the tool's failure as an *Error (GRPCCode OK: the RPC itself
// succeeded); nil when the tool succeeded. It returns error, not *Error, so
// that `if err := outcome.Err(); err != nil` works as expected.
func (o *ToolOutcome) Err() error {
	if f := o.Response.GetFailure(); f != nil {
		return FromFailure(f)
	}
	return nil
}

// Failure is the tool's failure as an *Error; nil when the tool succeeded.
func (o *ToolOutcome) Failure() *Error { return FromFailure(o.Response.GetFailure()) }

// Attempts is the number of upstream attempts made (0 when refused before sending).
func (o *ToolOutcome) Attempts() uint32 { return o.Response.GetAttempts() }

// OpenAIToolMessage is a tool-result message of the OpenAI chat format.
type OpenAIToolMessage struct {
	Role       string `json:"role"` // always "tool"
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
}

// AnthropicToolResult is a tool_result content block of the Anthropic
// Messages format; IsError is present (true) only for a failure.
type AnthropicToolResult struct {
	Type      string `json:"type"` // always "tool_result"
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error,omitempty"`
}

// OpenAIMessage is the outcome as an OpenAI chat tool message:
// {"role":"tool","tool_call_id":...,"content":ModelText}.
func (o *ToolOutcome) OpenAIMessage() OpenAIToolMessage {
	return OpenAIToolMessage{Role: "tool", ToolCallID: o.callID, Content: o.ModelText()}
}

// AnthropicBlock is the outcome as an Anthropic tool_result block:
// {"type":"tool_result","tool_use_id":...,"content":ModelText} plus
// "is_error":true on failure.
func (o *ToolOutcome) AnthropicBlock() AnthropicToolResult {
	return AnthropicToolResult{Type: "tool_result", ToolUseID: o.callID, Content: o.ModelText(), IsError: o.IsError()}
}

// ToolCallResult is the outcome as the sidecar.v1 ToolCallResult to hand back
// through CallModel.
func (o *ToolOutcome) ToolCallResult() *sidecarv1.ToolCallResult {
	return &sidecarv1.ToolCallResult{
		CallId:  o.callID,
		Content: o.ModelText(),
		IsError: o.IsError(),
		Name:    o.toolName,
	}
}

// ToolMessage is one ROLE_TOOL message answering every outcome, for the
// conversation of the next CallModel.
func ToolMessage(outcomes ...*ToolOutcome) *sidecarv1.Message {
	msg := &sidecarv1.Message{Role: sidecarv1.Role_ROLE_TOOL}
	for _, o := range outcomes {
		msg.ToolResults = append(msg.ToolResults, o.ToolCallResult())
	}
	return msg
}
