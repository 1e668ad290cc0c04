package sidecar

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of every sidecar failure.
const ErrorDomain = "sidecar"

// The line the model reads after a failure's message, by correctability: the
// contract's words, read at init from the options (sidecar.v1.correctable_line)
// and (sidecar.v1.uncorrectable_line) of the FailureKind enum. Read them, never
// assign them.
var (
	CorrectableLine   = proto.GetExtension(failureKinds.Options(), sidecarv1.E_CorrectableLine).(string)
	UncorrectableLine = proto.GetExtension(failureKinds.Options(), sidecarv1.E_UncorrectableLine).(string)
)

// failureKinds is the FailureKind enum's descriptor, whose options hold the
// taxonomy's fixed words.
var failureKinds = sidecarv1.FailureKind(0).Descriptor()

// correctableKinds are the kinds the contract marks (sidecar.v1.correctable).
var correctableKinds = func() map[sidecarv1.FailureKind]bool {
	kinds := map[sidecarv1.FailureKind]bool{}
	values := failureKinds.Values()
	for i := 0; i < values.Len(); i++ {
		if proto.GetExtension(values.Get(i).Options(), sidecarv1.E_Correctable).(bool) {
			kinds[sidecarv1.FailureKind(values.Get(i).Number())] = true
		}
	}
	return kinds
}()

const kindPrefix = "FAILURE_KIND_"

// Error is a sidecar failure as the client sees it: the sidecar.v1.Failure of a
// failed CallModel (rebuilt from the grpc-status-details-bin trailer), of a
// failed ExecuteTool outcome, or of any other failed RPC.
//
// Reach it with errors.As:
//
//	var failure *sidecar.Error
//	if errors.As(err, &failure) && failure.Kind == sidecarv1.FailureKind_FAILURE_KIND_QUOTA_EXHAUSTED { ... }
type Error struct {
	// Kind is what went wrong. For an RPC failure that carries no sidecar
	// failure it comes from the status code: DEADLINE_EXCEEDED gives JOB_TIMEOUT,
	// CANCELLED JOB_CANCELLED, UNAVAILABLE EXTERNAL_SERVICE, INVALID_ARGUMENT and
	// RESOURCE_EXHAUSTED INVALID_INPUT, any other SYSTEM.
	Kind sidecarv1.FailureKind
	// Correctable says whether a corrected call can help (true) or only another
	// approach (false).
	Correctable bool
	// Message is the failure in plain words.
	Message string
	// Explanation is Message, a newline and the retry line: what the model reads.
	Explanation string
	// HTTP is what the upstream answered; nil when no response came back.
	HTTP *sidecarv1.HttpDetail
	// RetryAfter is how long to wait before the same call could succeed; 0 when
	// unknown.
	RetryAfter time.Duration
	// Detail is the kind's structured detail (e.g. *sidecarv1.ResourceDetail,
	// *sidecarv1.TokenLimitDetail); nil when there is none.
	Detail proto.Message
	// Attempts is the number of upstream attempts made before the failure.
	Attempts uint32
	// Hops is, when the model id is a route, every deployment tried, in order
	// (the last one ended with this failure); nil otherwise.
	Hops []*sidecarv1.Hop
	// GRPCCode is the status code of the failed RPC; codes.OK for the failure
	// of an ExecuteTool outcome (that RPC succeeded).
	GRPCCode codes.Code
	// Reason is the google.rpc.ErrorInfo reason ("QUOTA_EXHAUSTED"); empty when
	// there was none.
	Reason string
	// Failure is the sidecar.v1.Failure itself; nil when the status carried none.
	Failure *sidecarv1.Failure
	// Status is the gRPC status of the failed RPC, details included; nil for the
	// failure of an ExecuteTool outcome.
	Status *status.Status
}

// Error implements error.
func (e *Error) Error() string {
	if e.Failure == nil && e.GRPCCode != codes.OK {
		return fmt.Sprintf("sidecar: %s (rpc %s): %s", KindName(e.Kind), codeName(e.GRPCCode), e.Message)
	}
	return fmt.Sprintf("sidecar: %s: %s", KindName(e.Kind), e.Message)
}

// KindName is the kind without its FAILURE_KIND_ prefix, e.g. "QUOTA_EXHAUSTED":
// the ErrorInfo reason of the failure.
func (e *Error) KindName() string { return KindName(e.Kind) }

// StreamDetail is the Detail of a STREAM_INTERRUPTED failure: what the stream
// had sent when it was cut (PartialText, Reason, DeltasSent). Nil for any
// other failure.
func (e *Error) StreamDetail() *sidecarv1.StreamDetail {
	d, _ := e.Detail.(*sidecarv1.StreamDetail)
	return d
}

// GRPCStatus lets status.FromError and status.Code see the original status.
func (e *Error) GRPCStatus() *status.Status {
	if e.Status != nil {
		return e.Status
	}
	return status.New(e.GRPCCode, e.Message)
}

// Is makes errors.Is(err, context.Canceled) and errors.Is(err,
// context.DeadlineExceeded) hold for a call that ended with the matching code.
func (e *Error) Is(target error) bool {
	switch target {
	case context.Canceled:
		return e.GRPCCode == codes.Canceled
	case context.DeadlineExceeded:
		return e.GRPCCode == codes.DeadlineExceeded
	}
	return false
}

// KindName returns a kind without its FAILURE_KIND_ prefix ("RESOURCE_NOT_FOUND").
func KindName(kind sidecarv1.FailureKind) string {
	return strings.TrimPrefix(kind.String(), kindPrefix)
}

// KindFromName parses a kind name with or without its FAILURE_KIND_ prefix.
// Unknown names give FAILURE_KIND_UNSPECIFIED and false.
func KindFromName(name string) (sidecarv1.FailureKind, bool) {
	name = strings.ToUpper(strings.TrimSpace(name))
	if !strings.HasPrefix(name, kindPrefix) {
		name = kindPrefix + name
	}
	v, ok := sidecarv1.FailureKind_value[name]
	return sidecarv1.FailureKind(v), ok
}

// IsCorrectableKind reports whether a kind is one of the correctable ones: the
// kinds the contract marks (sidecar.v1.correctable).
func IsCorrectableKind(kind sidecarv1.FailureKind) bool {
	return correctableKinds[kind]
}

// Explain joins a message and the retry line the model reads.
func Explain(message string, correctable bool) string {
	if correctable {
		return message + "\n" + CorrectableLine
	}
	return message + "\n" + UncorrectableLine
}

// FromFailure turns a sidecar.v1.Failure (an ExecuteTool outcome's failure, or
// a ClassifyFailure answer) into an *Error with GRPCCode OK. Nil gives nil.
func FromFailure(f *sidecarv1.Failure) *Error {
	if f == nil {
		return nil
	}
	e := &Error{GRPCCode: codes.OK}
	e.fill(f)
	return e
}

func (e *Error) fill(f *sidecarv1.Failure) {
	e.Failure = f
	e.Kind = f.GetKind()
	e.Correctable = f.GetCorrectable()
	e.Message = f.GetMessage()
	e.Explanation = f.GetExplanation()
	e.HTTP = f.GetHttp()
	if d := f.GetRetryAfter(); d != nil {
		e.RetryAfter = d.AsDuration()
	}
	e.Attempts = f.GetAttempts()
	e.Hops = f.GetHops()
	e.Detail = failureDetail(f)
	if e.Explanation == "" && e.Message != "" {
		e.Explanation = Explain(e.Message, e.Correctable)
	}
}

// failureDetail returns the message set in Failure's `detail` oneof, or nil.
func failureDetail(f *sidecarv1.Failure) proto.Message {
	oneof := f.ProtoReflect().Descriptor().Oneofs().ByName("detail")
	field := f.ProtoReflect().WhichOneof(oneof)
	if field == nil {
		return nil
	}
	return f.ProtoReflect().Get(field).Message().Interface()
}

// FromError rebuilds the *Error of a failed RPC. It returns nil for a nil
// error and the error itself when it already is (or wraps) an *Error.
//
// The google.rpc.Status of the call is read first for a packed
// sidecar.v1.Failure, which gives every field. Without one (a failure that did
// not come from the sidecar's failure policy), the google.rpc.ErrorInfo of
// domain "sidecar" gives the kind, RetryInfo the wait, and the status message
// (or, when empty, the code's name) the message; with neither, the kind follows
// from the status code (see Error.Kind) and GRPCCode keeps the code.
func FromError(err error) *Error {
	if err == nil {
		return nil
	}
	var already *Error
	if errors.As(err, &already) {
		return already
	}
	st, ok := status.FromError(err)
	if !ok {
		// Not a gRPC status: a context error or a local failure.
		st = status.FromContextError(err)
	}
	return fromStatus(st)
}

func fromStatus(st *status.Status) *Error {
	e := &Error{GRPCCode: st.Code(), Status: st, Message: st.Message()}
	var (
		failure   *sidecarv1.Failure
		info      *errdetails.ErrorInfo
		retryInfo *errdetails.RetryInfo
	)
	for _, detail := range st.Proto().GetDetails() {
		switch {
		case failure == nil && detail.MessageIs(&sidecarv1.Failure{}):
			f := &sidecarv1.Failure{}
			if unmarshalAny(detail, f) {
				failure = f
			}
		case info == nil && detail.MessageIs(&errdetails.ErrorInfo{}):
			i := &errdetails.ErrorInfo{}
			if unmarshalAny(detail, i) {
				info = i
			}
		case retryInfo == nil && detail.MessageIs(&errdetails.RetryInfo{}):
			r := &errdetails.RetryInfo{}
			if unmarshalAny(detail, r) {
				retryInfo = r
			}
		}
	}
	if info != nil {
		e.Reason = info.GetReason()
	}
	if failure != nil {
		e.fill(failure)
		if e.Message == "" {
			e.Message = st.Message()
		}
	} else {
		e.Kind = fallbackKind(st.Code())
		if info != nil && info.GetDomain() == ErrorDomain {
			if kind, ok := KindFromName(info.GetReason()); ok {
				e.Kind = kind
			}
		}
		e.Correctable = IsCorrectableKind(e.Kind)
		if e.Message == "" {
			e.Message = codeName(st.Code())
		}
		e.Explanation = Explain(e.Message, e.Correctable)
	}
	if e.RetryAfter == 0 && retryInfo.GetRetryDelay() != nil {
		e.RetryAfter = retryInfo.GetRetryDelay().AsDuration()
	}
	return e
}

// fallbackKind is the kind of a failed RPC that carries no sidecar failure,
// by its status code (the same table in every client).
func fallbackKind(code codes.Code) sidecarv1.FailureKind {
	switch code {
	case codes.DeadlineExceeded:
		return sidecarv1.FailureKind_FAILURE_KIND_JOB_TIMEOUT
	case codes.Canceled:
		return sidecarv1.FailureKind_FAILURE_KIND_JOB_CANCELLED
	case codes.Unavailable:
		return sidecarv1.FailureKind_FAILURE_KIND_EXTERNAL_SERVICE
	case codes.ResourceExhausted, codes.InvalidArgument:
		return sidecarv1.FailureKind_FAILURE_KIND_INVALID_INPUT
	}
	return sidecarv1.FailureKind_FAILURE_KIND_SYSTEM
}

// codeName is the canonical name of a status code, e.g. "DEADLINE_EXCEEDED".
func codeName(code codes.Code) string {
	if name, ok := canonicalCodeNames[code]; ok {
		return name
	}
	return code.String()
}

var canonicalCodeNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
	codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
	codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
	codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
	codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS",
	codes.Unauthenticated: "UNAUTHENTICATED",
}

// CodeName is the canonical (proto) name of a gRPC status code, e.g.
// "RESOURCE_EXHAUSTED"; grpc-go's own String() says "ResourceExhausted".
func CodeName(code codes.Code) string { return codeName(code) }

func unmarshalAny(a *anypb.Any, m proto.Message) bool {
	return a.UnmarshalTo(m) == nil
}
