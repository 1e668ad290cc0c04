package sidecar

import (
	"context"
	"errors"
	"io"
	"iter"
	"maps"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

// NoFinalMessage is the message of the SYSTEM failure Collect returns when a
// stream ends without its final event.
const NoFinalMessage = "The StreamModel stream ended without its final event."

// ModelStream is one StreamModel call: the reply as the model writes it.
//
// Read it with a Recv loop (io.EOF at the end) or range over Events; either
// way the stream keeps what has come so far:
//
//	event      Text / ToolCalls / Reasoning            Restarts   Final
//	text       Text += delta                           -          -
//	tool_call  ToolCalls[index] grows by the fragment  -          -
//	reasoning  Reasoning[index]: text += delta; its    -          -
//	           signature / redacted data when they come
//	restart    all emptied: what came before is void   += 1       -
//	final      -                                       -          the whole reply
//
// To pass the reasoning back on the next turn, append Assistant(Final().GetMessage()):
// the final reply's reasoning is the same, with the wire format that made it.
//
// A failure ends the stream with the *Error CallModel returns for it, after
// every event sent before it. Cancel, the context's cancellation, or leaving
// the range over Events early (break, return, a panic: its deferred Cancel
// runs) cancels the RPC. Leaving a Recv loop cancels nothing: write
// defer stream.Cancel() after StreamModel. A ModelStream is for one goroutine.
type ModelStream struct {
	rpc       grpc.ServerStreamingClient[sidecarv1.StreamModelEvent]
	cancel    context.CancelFunc
	text      strings.Builder
	toolCalls map[uint32]*sidecarv1.ToolCall
	reasoning map[uint32]*sidecarv1.ReasoningPart
	restarts  int
	final     *sidecarv1.CallModelResponse
	err       error // the terminal error (io.EOF for a stream that ended OK)
}

// StreamModel starts a StreamModel call: the request of CallModel, the reply
// as events (see ModelStream). The error is an *Error only when the call
// cannot start; a failure of the call itself comes from Recv.
func (c *Client) StreamModel(ctx context.Context, req *sidecarv1.CallModelRequest, opts ...grpc.CallOption) (*ModelStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	rpc, err := c.rpc.StreamModel(ctx, req, opts...)
	if err != nil {
		cancel()
		return nil, FromError(err)
	}
	return &ModelStream{
		rpc: rpc, cancel: cancel,
		toolCalls: map[uint32]*sidecarv1.ToolCall{}, reasoning: map[uint32]*sidecarv1.ReasoningPart{},
	}, nil
}

// Recv returns the next event; io.EOF after the last one (the final event);
// an *Error when the call failed (the events before it were returned first).
// After the end it keeps returning the same error.
func (s *ModelStream) Recv() (*sidecarv1.StreamModelEvent, error) {
	if s.err != nil {
		return nil, s.err
	}
	event, err := s.rpc.Recv()
	if err != nil {
		s.cancel() // release the call's resources
		if errors.Is(err, io.EOF) {
			s.err = io.EOF
		} else {
			s.err = FromError(err)
		}
		return nil, s.err
	}
	s.absorb(event)
	return event, nil
}

// Events ranges over the stream's events. A failure is yielded once, as a nil
// event and its *Error, and ends the range; the end of the stream ends it
// without one. Breaking out of the range cancels the RPC.
//
//	for event, err := range stream.Events() {
//		if err != nil { ... }
//	}
func (s *ModelStream) Events() iter.Seq2[*sidecarv1.StreamModelEvent, error] {
	return func(yield func(*sidecarv1.StreamModelEvent, error) bool) {
		defer s.Cancel()
		for {
			event, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if !yield(event, err) || err != nil {
				return
			}
		}
	}
}

// Collect reads the rest of the stream and returns the final reply (Text
// holds its text). A failure is the *Error Recv gave; a stream that ended
// without a final event gives a SYSTEM *Error.
func (s *ModelStream) Collect() (*sidecarv1.CallModelResponse, error) {
	for {
		_, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if s.final == nil {
		return nil, &Error{
			Kind: sidecarv1.FailureKind_FAILURE_KIND_SYSTEM, Message: NoFinalMessage,
			Explanation: Explain(NoFinalMessage, false), GRPCCode: codes.OK,
		}
	}
	return s.final, nil
}

// Cancel cancels the RPC; it does nothing once the stream has ended.
func (s *ModelStream) Cancel() { s.cancel() }

// Text is the text since the last restart, joined.
func (s *ModelStream) Text() string { return s.text.String() }

// ToolCalls are the tool calls assembled from their fragments since the last
// restart, by index.
func (s *ModelStream) ToolCalls() []*sidecarv1.ToolCall {
	calls := make([]*sidecarv1.ToolCall, 0, len(s.toolCalls))
	for _, i := range slices.Sorted(maps.Keys(s.toolCalls)) {
		calls = append(calls, s.toolCalls[i])
	}
	return calls
}

// Reasoning are the reasoning parts assembled from their deltas since the
// last restart, by index.
func (s *ModelStream) Reasoning() []*sidecarv1.ReasoningPart {
	parts := make([]*sidecarv1.ReasoningPart, 0, len(s.reasoning))
	for _, i := range slices.Sorted(maps.Keys(s.reasoning)) {
		parts = append(parts, s.reasoning[i])
	}
	return parts
}

// Restarts is the number of restart events received.
func (s *ModelStream) Restarts() int { return s.restarts }

// Final is the whole reply, as CallModel returns it; nil until the final event.
func (s *ModelStream) Final() *sidecarv1.CallModelResponse { return s.final }

func (s *ModelStream) absorb(event *sidecarv1.StreamModelEvent) {
	switch e := event.GetEvent().(type) {
	case *sidecarv1.StreamModelEvent_Text:
		s.text.WriteString(e.Text.GetText())
	case *sidecarv1.StreamModelEvent_ToolCall:
		d := e.ToolCall
		call, ok := s.toolCalls[d.GetIndex()]
		if !ok {
			call = &sidecarv1.ToolCall{}
			s.toolCalls[d.GetIndex()] = call
		}
		if call.Id == "" {
			call.Id = d.GetId()
		}
		if call.Name == "" {
			call.Name = d.GetName()
		}
		call.ArgumentsJson += d.GetArgumentsFragment()
	case *sidecarv1.StreamModelEvent_Reasoning:
		d := e.Reasoning
		part, ok := s.reasoning[d.GetIndex()]
		if !ok {
			part = &sidecarv1.ReasoningPart{}
			s.reasoning[d.GetIndex()] = part
		}
		part.Text += d.GetText()
		if d.GetSignature() != "" {
			part.Signature = d.GetSignature()
		}
		if d.GetRedactedData() != "" {
			part.RedactedData = d.GetRedactedData()
		}
	case *sidecarv1.StreamModelEvent_Restart:
		s.text.Reset()
		clear(s.toolCalls)
		clear(s.reasoning)
		s.restarts++
	case *sidecarv1.StreamModelEvent_Final:
		s.final = e.Final
	}
}
