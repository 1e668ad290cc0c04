package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

// codeForKind is the failure wire format's choice of status code by kind.
var codeForKind = map[sidecarv1.FailureKind]codes.Code{
	sidecarv1.FailureKind_FAILURE_KIND_INVALID_INPUT:                codes.InvalidArgument,
	sidecarv1.FailureKind_FAILURE_KIND_MODEL_NOT_FOUND:              codes.NotFound,
	sidecarv1.FailureKind_FAILURE_KIND_QUOTA_EXHAUSTED:              codes.ResourceExhausted,
	sidecarv1.FailureKind_FAILURE_KIND_SPEND_CAP_EXCEEDED:           codes.ResourceExhausted,
	sidecarv1.FailureKind_FAILURE_KIND_UPSTREAM_RETRIES_EXHAUSTED:   codes.Unavailable,
	sidecarv1.FailureKind_FAILURE_KIND_EXTERNAL_SERVICE:             codes.Unavailable,
	sidecarv1.FailureKind_FAILURE_KIND_CIRCUIT_OPEN:                 codes.Unavailable,
	sidecarv1.FailureKind_FAILURE_KIND_JOB_TIMEOUT:                  codes.DeadlineExceeded,
	sidecarv1.FailureKind_FAILURE_KIND_JOB_CANCELLED:                codes.Canceled,
	sidecarv1.FailureKind_FAILURE_KIND_TOKEN_ESTIMATE_EXCEEDS_LIMIT: codes.FailedPrecondition,
	sidecarv1.FailureKind_FAILURE_KIND_CONTEXT_OVERFLOW:             codes.FailedPrecondition,
	sidecarv1.FailureKind_FAILURE_KIND_PROVIDER_REFUSAL:             codes.FailedPrecondition,
	sidecarv1.FailureKind_FAILURE_KIND_OUTPUT_TRUNCATED:             codes.FailedPrecondition,
	sidecarv1.FailureKind_FAILURE_KIND_UNAUTHORIZED:                 codes.FailedPrecondition,
	sidecarv1.FailureKind_FAILURE_KIND_JSON_PARSE:                   codes.Aborted,
	sidecarv1.FailureKind_FAILURE_KIND_STREAM_INTERRUPTED:           codes.Aborted,
	sidecarv1.FailureKind_FAILURE_KIND_SYSTEM:                       codes.Internal,
}

// failureStatus builds the status a sidecar sends for f: the Failure packed in
// the details, one ErrorInfo, RetryInfo when a wait is known, then extras.
func failureStatus(t *testing.T, f *sidecarv1.Failure, extras ...proto.Message) *status.Status {
	t.Helper()
	code, ok := codeForKind[f.GetKind()]
	if !ok {
		code = codes.Internal
	}
	details := []protoadapt.MessageV1{
		protoadapt.MessageV1Of(f),
		&errdetails.ErrorInfo{Reason: KindName(f.GetKind()), Domain: ErrorDomain, Metadata: map[string]string{"model": "fast"}},
	}
	if f.GetRetryAfter() != nil {
		details = append(details, &errdetails.RetryInfo{RetryDelay: f.GetRetryAfter()})
	}
	for _, m := range extras {
		details = append(details, protoadapt.MessageV1Of(m))
	}
	st, err := status.New(code, f.GetMessage()).WithDetails(details...)
	if err != nil {
		t.Fatalf("WithDetails: %v", err)
	}
	return st
}

func quotaFailure() *sidecarv1.Failure {
	msg := "The provider account of openai is out of credit."
	return &sidecarv1.Failure{
		Kind:        sidecarv1.FailureKind_FAILURE_KIND_QUOTA_EXHAUSTED,
		Correctable: false,
		Message:     msg,
		Explanation: msg + "\n" + UncorrectableLine,
		Http: &sidecarv1.HttpDetail{
			StatusCode: 429, Service: "openai", Endpoint: "/v1/chat/completions",
			Body: `{"error":{"code":"insufficient_quota"}}`, RetryAfterRaw: proto.String("7"),
		},
		RetryAfter: durationpb.New(7 * time.Second),
		Attempts:   1,
		Detail: &sidecarv1.Failure_Provider{Provider: &sidecarv1.ProviderDetail{
			Provider: "openai", Account: "default", Model: "fast", ProviderMessage: "You exceeded your current quota",
		}},
	}
}

func TestFromErrorRebuildsEveryFieldFromThePackedFailure(t *testing.T) {
	f := quotaFailure()
	err := FromError(failureStatus(t, f, &errdetails.QuotaFailure{}).Err())

	if err.Kind != sidecarv1.FailureKind_FAILURE_KIND_QUOTA_EXHAUSTED || err.KindName() != "QUOTA_EXHAUSTED" {
		t.Errorf("kind = %v", err.Kind)
	}
	if err.Correctable {
		t.Error("quota exhaustion must not be correctable")
	}
	if err.Message != f.GetMessage() || err.Explanation != f.GetExplanation() {
		t.Errorf("message/explanation = %q / %q", err.Message, err.Explanation)
	}
	if err.HTTP.GetStatusCode() != 429 || err.HTTP.GetService() != "openai" || err.HTTP.GetEndpoint() != "/v1/chat/completions" || err.HTTP.GetRetryAfterRaw() != "7" {
		t.Errorf("http = %v", err.HTTP)
	}
	if err.RetryAfter != 7*time.Second {
		t.Errorf("retry after = %v", err.RetryAfter)
	}
	if d, ok := err.Detail.(*sidecarv1.ProviderDetail); !ok || d.GetProvider() != "openai" {
		t.Errorf("detail = %#v", err.Detail)
	}
	if err.GRPCCode != codes.ResourceExhausted || err.Reason != "QUOTA_EXHAUSTED" || err.Attempts != 1 {
		t.Errorf("code/reason/attempts = %v %q %d", err.GRPCCode, err.Reason, err.Attempts)
	}
	if !proto.Equal(err.Failure, f) {
		t.Errorf("failure = %v", err.Failure)
	}
}

func TestErrorIsReachableWithErrorsAsThroughWrapping(t *testing.T) {
	var err error = FromError(failureStatus(t, quotaFailure()).Err())
	wrapped := fmt.Errorf("agent step 3: %w", err)

	var failure *Error
	if !errors.As(wrapped, &failure) {
		t.Fatal("errors.As did not find *Error")
	}
	if failure.Kind != sidecarv1.FailureKind_FAILURE_KIND_QUOTA_EXHAUSTED {
		t.Errorf("kind = %v", failure.Kind)
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("status.Code = %v", status.Code(err))
	}
	if FromError(wrapped) != failure {
		t.Error("FromError of a wrapped *Error must return it as it is")
	}
}

func TestRetryInfoGivesTheWaitWhenTheFailureHasNone(t *testing.T) {
	f := &sidecarv1.Failure{Kind: sidecarv1.FailureKind_FAILURE_KIND_UPSTREAM_RETRIES_EXHAUSTED, Message: "m", Explanation: "m\n" + UncorrectableLine}
	st, _ := status.New(codes.Unavailable, "m").WithDetails(
		protoadapt.MessageV1Of(f),
		&errdetails.ErrorInfo{Reason: "UPSTREAM_RETRIES_EXHAUSTED", Domain: ErrorDomain},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(1500 * time.Millisecond)},
	)
	if got := FromError(st.Err()).RetryAfter; got != 1500*time.Millisecond {
		t.Errorf("retry after = %v", got)
	}
}

func TestAbsentHTTPAndRetryStayAbsent(t *testing.T) {
	f := &sidecarv1.Failure{
		Kind: sidecarv1.FailureKind_FAILURE_KIND_MODEL_NOT_FOUND, Correctable: false,
		Message: "No model gpt-9 in the catalog.", Explanation: "No model gpt-9 in the catalog.\n" + UncorrectableLine,
		Detail: &sidecarv1.Failure_Resource{Resource: &sidecarv1.ResourceDetail{ResourceType: "model", Identifier: "gpt-9", Available: []string{"fast"}}},
	}
	err := FromError(failureStatus(t, f).Err())
	if err.HTTP != nil {
		t.Errorf("http = %v, want nil", err.HTTP)
	}
	if err.RetryAfter != 0 {
		t.Errorf("retry after = %v, want 0", err.RetryAfter)
	}
	if err.GRPCCode != codes.NotFound {
		t.Errorf("code = %v", err.GRPCCode)
	}
}

func TestErrorInfoAloneGivesKindAndCorrectability(t *testing.T) {
	st, _ := status.New(codes.Aborted, "The reply was not a JSON object.").WithDetails(
		&errdetails.ErrorInfo{Reason: "JSON_PARSE", Domain: ErrorDomain},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(2 * time.Second)},
	)
	err := FromError(st.Err())
	if err.Kind != sidecarv1.FailureKind_FAILURE_KIND_JSON_PARSE || !err.Correctable {
		t.Errorf("kind/correctable = %v %v", err.Kind, err.Correctable)
	}
	if err.Message != "The reply was not a JSON object." || err.Explanation != "The reply was not a JSON object.\n"+CorrectableLine {
		t.Errorf("message/explanation = %q / %q", err.Message, err.Explanation)
	}
	if err.RetryAfter != 2*time.Second || err.Failure != nil || err.Reason != "JSON_PARSE" {
		t.Errorf("retry/failure/reason = %v %v %q", err.RetryAfter, err.Failure, err.Reason)
	}
}

func TestErrorInfoOfAnotherDomainIsNotASidecarKind(t *testing.T) {
	st, _ := status.New(codes.PermissionDenied, "denied by mesh").WithDetails(
		&errdetails.ErrorInfo{Reason: "JSON_PARSE", Domain: "mesh.example"},
	)
	err := FromError(st.Err())
	if err.Kind != sidecarv1.FailureKind_FAILURE_KIND_SYSTEM || err.Reason != "JSON_PARSE" || err.Correctable {
		t.Errorf("kind/reason/correctable = %v %q %v", err.Kind, err.Reason, err.Correctable)
	}
}

func TestANonSidecarStatusKeepsItsCodeAndMessage(t *testing.T) {
	err := FromError(status.Error(codes.Unavailable, "connection refused"))
	if err.Kind != sidecarv1.FailureKind_FAILURE_KIND_EXTERNAL_SERVICE || err.Correctable {
		t.Errorf("kind/correctable = %v %v", err.Kind, err.Correctable)
	}
	if err.GRPCCode != codes.Unavailable || err.Message != "connection refused" {
		t.Errorf("code/message = %v %q", err.GRPCCode, err.Message)
	}
	if err.Explanation != "connection refused\n"+UncorrectableLine {
		t.Errorf("explanation = %q", err.Explanation)
	}
	if err.Error() != "sidecar: EXTERNAL_SERVICE (rpc UNAVAILABLE): connection refused" {
		t.Errorf("Error() = %q", err.Error())
	}
}

func TestANonSidecarStatusTakesItsKindFromTheCode(t *testing.T) {
	for code, kind := range map[codes.Code]sidecarv1.FailureKind{
		codes.DeadlineExceeded:  sidecarv1.FailureKind_FAILURE_KIND_JOB_TIMEOUT,
		codes.Canceled:          sidecarv1.FailureKind_FAILURE_KIND_JOB_CANCELLED,
		codes.Unavailable:       sidecarv1.FailureKind_FAILURE_KIND_EXTERNAL_SERVICE,
		codes.InvalidArgument:   sidecarv1.FailureKind_FAILURE_KIND_INVALID_INPUT,
		codes.ResourceExhausted: sidecarv1.FailureKind_FAILURE_KIND_INVALID_INPUT,
		codes.Unknown:           sidecarv1.FailureKind_FAILURE_KIND_SYSTEM,
		codes.Internal:          sidecarv1.FailureKind_FAILURE_KIND_SYSTEM,
	} {
		err := FromError(status.Error(code, ""))
		if err.Kind != kind || err.Correctable != IsCorrectableKind(kind) {
			t.Errorf("%v: kind %v correctable %v", code, err.Kind, err.Correctable)
		}
		if err.Message != CodeName(code) {
			t.Errorf("%v: an empty message becomes the code name, got %q", code, err.Message)
		}
	}
}

func TestContextErrorsMatchErrorsIs(t *testing.T) {
	if err := FromError(context.DeadlineExceeded); !errors.Is(err, context.DeadlineExceeded) || err.GRPCCode != codes.DeadlineExceeded {
		t.Errorf("deadline: %v", err)
	}
	if err := FromError(status.Error(codes.Canceled, "context canceled")); !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("canceled: %v", err)
	}
}

func TestNilIsNil(t *testing.T) {
	if FromError(nil) != nil || FromFailure(nil) != nil {
		t.Error("nil in, nil out")
	}
}

func TestEveryKindRoundTripsThroughItsName(t *testing.T) {
	for value, name := range sidecarv1.FailureKind_name {
		kind := sidecarv1.FailureKind(value)
		got, ok := KindFromName(KindName(kind))
		if !ok || got != kind {
			t.Errorf("%s: got %v %v", name, got, ok)
		}
	}
	if _, ok := KindFromName("NOT_A_KIND"); ok {
		t.Error("unknown kind accepted")
	}
}

func TestCorrectableKindsAreExactlyTheFive(t *testing.T) {
	want := map[string]bool{"INVALID_INPUT": true, "RESOURCE_NOT_FOUND": true, "GUARDRAIL": true, "JSON_PARSE": true, "RESPONSE_VALIDATION": true}
	for value := range sidecarv1.FailureKind_name {
		kind := sidecarv1.FailureKind(value)
		if IsCorrectableKind(kind) != want[KindName(kind)] {
			t.Errorf("%s: correctable = %v", KindName(kind), IsCorrectableKind(kind))
		}
	}
}

// failureKindsFile is what the contract says of each kind, as data: written by
// tools/protogen.py from sidecar.proto (its --check fails when stale); every
// client's tests compare their answers with it.
const failureKindsFile = "../../tests/conformance/failure_kinds.json"

func TestTheClientSaysWhatTheContractSaysOfEveryKind(t *testing.T) {
	raw, err := os.ReadFile(failureKindsFile)
	if err != nil {
		t.Fatal(err)
	}
	var contract struct {
		CorrectableLine   string `json:"correctable_line"`
		UncorrectableLine string `json:"uncorrectable_line"`
		Kinds             []struct {
			Number      int32  `json:"number"`
			Name        string `json:"name"`
			Correctable bool   `json:"correctable"`
		} `json:"kinds"`
	}
	if err := json.Unmarshal(raw, &contract); err != nil {
		t.Fatal(err)
	}
	if CorrectableLine != contract.CorrectableLine || UncorrectableLine != contract.UncorrectableLine {
		t.Errorf("retry lines %q / %q, the contract says %q / %q", CorrectableLine, UncorrectableLine, contract.CorrectableLine, contract.UncorrectableLine)
	}
	if len(contract.Kinds) != len(sidecarv1.FailureKind_name) {
		t.Errorf("%d kinds, the contract has %d", len(sidecarv1.FailureKind_name), len(contract.Kinds))
	}
	for _, want := range contract.Kinds {
		kind := sidecarv1.FailureKind(want.Number)
		if KindName(kind) != want.Name || IsCorrectableKind(kind) != want.Correctable {
			t.Errorf("kind %d: %s correctable %v, the contract says %s correctable %v", want.Number, KindName(kind), IsCorrectableKind(kind), want.Name, want.Correctable)
		}
		line := contract.UncorrectableLine
		if want.Correctable {
			line = contract.CorrectableLine
		}
		if got := Explain("m", IsCorrectableKind(kind)); got != "m\n"+line {
			t.Errorf("%s: Explain = %q", want.Name, got)
		}
	}
}

func TestHopsComeFromTheFailure(t *testing.T) {
	err := FromError(failureStatus(t, interruptedFailure()).Err())
	if len(err.Hops) != 2 || err.Hops[0].GetReason() != "circuit open" || err.Hops[1].GetAttempts() != 1 {
		t.Errorf("hops = %v", err.Hops)
	}
	if FromError(failureStatus(t, quotaFailure()).Err()).Hops != nil {
		t.Error("a failure without hops has none")
	}
	if FromFailure(quotaFailure()).StreamDetail() != nil {
		t.Error("StreamDetail of another kind must be nil")
	}
}
