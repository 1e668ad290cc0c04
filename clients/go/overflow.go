package sidecar

// A conversation that does not fit the model's window: the request's on_overflow, and
// the compacted history a reply carries.
//
//	CompactOnOverflow(strategies...)  on_overflow: compact, trying the strategies in order
//	                                  (none: the model's configured order)
//	FailOnOverflow()                  on_overflow: fail with CONTEXT_OVERFLOW
//	Compacted(messages, reply)        the conversation to go on with: the reply's compacted
//	                                  messages when the sidecar compacted, else messages

import (
	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

// CompactOnOverflow is a CallModelRequest's OnOverflow that compacts a conversation
// that does not fit the model's window and tries again, trying strategies in the
// order given (none: the model's configured order); the call fails with
// CONTEXT_OVERFLOW only when even the compacted conversation does not fit.
func CompactOnOverflow(strategies ...sidecarv1.CompactionStrategy) *sidecarv1.OverflowPolicy {
	return &sidecarv1.OverflowPolicy{
		Action:     sidecarv1.OverflowAction_OVERFLOW_ACTION_COMPACT,
		Strategies: append([]sidecarv1.CompactionStrategy(nil), strategies...),
	}
}

// FailOnOverflow is a CallModelRequest's OnOverflow that fails a conversation that
// does not fit with CONTEXT_OVERFLOW (a route moves on to a larger-context deployment).
func FailOnOverflow() *sidecarv1.OverflowPolicy {
	return &sidecarv1.OverflowPolicy{Action: sidecarv1.OverflowAction_OVERFLOW_ACTION_FAIL}
}

// Compacted returns the conversation to go on with: the reply's compacted messages
// when the sidecar compacted the conversation to fit (reply.GetCompaction()), else
// messages. Append Assistant(reply.GetMessage()) to either. The slice is a new one.
func Compacted(messages []*sidecarv1.Message, reply *sidecarv1.CallModelResponse) []*sidecarv1.Message {
	if c := reply.GetCompaction(); c != nil {
		return append([]*sidecarv1.Message(nil), c.GetMessages()...)
	}
	return append([]*sidecarv1.Message(nil), messages...)
}
