// Package sidecar is the Go client of the sidecar.v1 contract: model calls and
// tool calls run by a sidecar process under one failure policy.
//
//	c, err := sidecar.Dial(os.Getenv("SIDECAR_ADDR")) // "127.0.0.1:50051" or "unix:/run/sidecar.sock"
//	reply, err := c.CallModel(ctx, &sidecarv1.CallModelRequest{Model: "fast", Messages: msgs})
//	var failure *sidecar.Error
//	if errors.As(err, &failure) { ... failure.Kind, failure.Correctable, failure.RetryAfter ... }
//	outcome, err := c.ExecuteTool(ctx, call) // err only for a malformed request or a transport fault
//	msgs = append(msgs, sidecar.ToolMessage(outcome))
//
// Two carriers, one taxonomy:
//
//   - ExecuteTool never fails the RPC for a tool's failure. The returned
//     [ToolOutcome] holds either a result or a failure, and its ModelText is what
//     goes back to the model either way ([ToolOutcome.OpenAIMessage],
//     [ToolOutcome.AnthropicBlock], [ToolMessage]).
//   - CallModel fails the RPC when no reply can be produced. The error is an
//     [*Error] rebuilt from the sidecar.v1.Failure packed in the
//     grpc-status-details-bin trailer (or, for a failure that did not come from
//     the sidecar, from the gRPC status alone).
//
// Content: [User] builds a turn with images and documents (files, bytes or
// URLs, the media type read from the bytes or the suffix), [Assistant] passes a
// reply back with its reasoning unchanged (the provider verifies its
// signature), [ToolResult] carries a tool's images; [ReasoningEffort],
// [ReasoningBudget], [ToolChoice], [CacheBreakpoint] and [ProviderOptions]
// fill the request's controls:
//
//	msg, err := sidecar.User("what is this?", sidecar.WithImageFile("shot.png"))
//	req := &sidecarv1.CallModelRequest{Model: "claude", Messages: []*sidecarv1.Message{msg},
//		Reasoning: sidecar.ReasoningBudget(2048), ToolChoice: sidecar.ToolChoice("auto")}
//	reply, err := c.CallModel(ctx, req)
//	req.Messages = append(req.Messages, sidecar.Assistant(reply.GetMessage()))
//
// A conversation that does not fit the model's window: [CompactOnOverflow] as the
// request's OnOverflow asks the sidecar to compact it and try again, and
// [Compacted] adopts the compacted history the reply carries (reply.GetCompaction()):
//
//	req.OnOverflow = sidecar.CompactOnOverflow(sidecarv1.CompactionStrategy_COMPACTION_STRATEGY_TOOL_RESULTS)
//	reply, err = c.CallModel(ctx, req)
//	req.Messages = append(sidecar.Compacted(req.Messages, reply), sidecar.Assistant(reply.GetMessage()))
//
// StreamModel is CallModel streamed: a [ModelStream] read with Recv or ranged
// over with Events, keeping the text, tool calls and reasoning since the last restart
// (a restart event voids what came before it) and the final reply; Collect
// returns that reply. Its failure is the *Error CallModel returns for it;
// STREAM_INTERRUPTED carries what had been sent ([Error.StreamDetail]).
//
// Every method takes a context: its deadline travels to the sidecar as the gRPC
// deadline (the sidecar answers JOB_TIMEOUT when its work cannot finish in
// time), and cancelling it cancels the call.
//
// The generated stubs live in the gen/sidecar/v1 package (import it as
// sidecarv1); they are written by tools/gen_clients.sh and never edited by hand.
package sidecar
