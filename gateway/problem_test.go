package gateway

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestProblemFromStatus(t *testing.T) {
	t.Parallel()
	withDetails := func(code codes.Code, details ...*errdetails.ErrorInfo) *status.Status {
		st := status.New(code, "message")
		for _, d := range details {
			st, _ = st.WithDetails(d)
		}
		return st
	}
	retry := func(code codes.Code, after time.Duration) *status.Status {
		st, _ := status.New(code, "slow down").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(after)})
		return st
	}
	for _, tc := range []struct {
		name       string
		st         *status.Status
		httpStatus int
		retryAfter int
		typ        string
	}{
		{"reused key", withDetails(codes.InvalidArgument, &errdetails.ErrorInfo{Reason: "IDEMPOTENCY_KEY_REUSED", Domain: "oncejob.dev"}), 422, 0, "urn:oncejob:problem:IDEMPOTENCY_KEY_REUSED"},
		{"missing key", withDetails(codes.InvalidArgument, &errdetails.ErrorInfo{Reason: "IDEMPOTENCY_KEY_INVALID", Domain: "oncejob.dev"}), 400, 0, "urn:oncejob:problem:IDEMPOTENCY_KEY_INVALID"},
		{"status conflict", withDetails(codes.FailedPrecondition, &errdetails.ErrorInfo{Reason: "JOB_STATUS_CONFLICT"}), 409, 0, "urn:oncejob:problem:JOB_STATUS_CONFLICT"},
		{"in flight", status.New(codes.Aborted, "in flight"), 409, 0, "about:blank"},
		{"not found", status.New(codes.NotFound, "job x not found"), 404, 0, "about:blank"},
		{"unauthenticated", status.New(codes.Unauthenticated, "unknown API key"), 401, 0, "about:blank"},
		{"rate limited with a hint", retry(codes.ResourceExhausted, 2500*time.Millisecond), 429, 3, "about:blank"},
		{"rate limited without", status.New(codes.ResourceExhausted, "busy"), 429, 1, "about:blank"},
		{"unavailable with a hint", retry(codes.Unavailable, 7*time.Second), 503, 7, "about:blank"},
		{"shutting down", withDetails(codes.Unavailable, &errdetails.ErrorInfo{Reason: "SERVER_SHUTTING_DOWN"}), 503, 1, "urn:oncejob:problem:SERVER_SHUTTING_DOWN"},
		{"out of range", status.New(codes.OutOfRange, "after_seq"), 400, 0, "about:blank"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := problemFromStatus(tc.st)
			require.Equal(t, tc.httpStatus, p.Status)
			require.Equal(t, http.StatusText(tc.httpStatus), p.Title)
			require.Equal(t, tc.retryAfter, p.RetryAfterSeconds)
			require.Equal(t, tc.typ, p.Type)
			require.Equal(t, tc.st.Message(), p.Detail)
			require.Equal(t, codeNames[tc.st.Code()], p.Code)
		})
	}
}
