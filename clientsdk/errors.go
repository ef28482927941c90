package clientsdk

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// The server's ErrorInfo reasons the SDK turns into types.
const (
	reasonKeyReused      = "IDEMPOTENCY_KEY_REUSED"
	reasonKeyInvalid     = "IDEMPOTENCY_KEY_INVALID"
	reasonStatusConflict = "JOB_STATUS_CONFLICT"
	reasonShuttingDown   = "SERVER_SHUTTING_DOWN"
)

var (
	// ErrNotFound: the job does not exist for the caller (another tenant's
	// job does not exist either).
	ErrNotFound = errors.New("oncejob: not found")
	// ErrBudgetSpent: retries stopped before the call succeeded, because
	// the attempts ran out or the context's deadline came first. The error
	// is a *BudgetError.
	ErrBudgetSpent = errors.New("oncejob: retry budget spent")
)

// Every error a Client method returns for a status from the server has a
// GRPCStatus method, so status.Code and status.FromError work on it, and
// one of these types, for errors.Is and errors.As.

// StatusError is an error status of no more specific type.
type StatusError struct {
	Status *status.Status
}

func (e *StatusError) Error() string              { return statusText(e.Status) }
func (e *StatusError) GRPCStatus() *status.Status { return e.Status }

// Is makes errors.Is(err, ErrNotFound) true for NOT_FOUND, and
// context.Canceled and context.DeadlineExceeded true for CANCELLED and
// DEADLINE_EXCEEDED.
func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status.Code() == codes.NotFound
	case context.Canceled:
		return e.Status.Code() == codes.Canceled
	case context.DeadlineExceeded:
		return e.Status.Code() == codes.DeadlineExceeded
	}
	return false
}

// KeyReusedError: the idempotency key was already used with another
// request. Use a new key for a new request; retrying cannot succeed.
type KeyReusedError struct {
	Key    string
	Status *status.Status
}

func (e *KeyReusedError) Error() string {
	return fmt.Sprintf("idempotency key %q was already used with a different request", e.Key)
}
func (e *KeyReusedError) GRPCStatus() *status.Status { return e.Status }

// PreconditionError: the job's status does not allow the request, e.g.
// replaying a job that succeeded. JobStatus is the job's status then.
type PreconditionError struct {
	JobID     string
	JobStatus oncejobv1.JobStatus
	Status    *status.Status
}

func (e *PreconditionError) Error() string {
	return fmt.Sprintf("job %s is %s: the request does not apply to it", e.JobID, strings.TrimPrefix(e.JobStatus.String(), "JOB_STATUS_"))
}
func (e *PreconditionError) GRPCStatus() *status.Status { return e.Status }

// FieldViolation is one bad field of a request.
type FieldViolation struct {
	Field       string
	Description string
}

// InvalidRequestError: the server refused the request as malformed
// (INVALID_ARGUMENT). Violations lists each bad field; Reason is the
// ErrorInfo reason when there is one (IDEMPOTENCY_KEY_INVALID).
type InvalidRequestError struct {
	Violations []FieldViolation
	Reason     string
	Status     *status.Status
}

func (e *InvalidRequestError) Error() string              { return "oncejob: " + statusText(e.Status) }
func (e *InvalidRequestError) GRPCStatus() *status.Status { return e.Status }

// BudgetError: the call was retried and did not succeed. Attempts is the
// number of attempts made; Last is the last attempt's error (decoded like
// any other). Deadline is true when the context's deadline ended the
// retries rather than the number of attempts; the status is then
// DEADLINE_EXCEEDED, otherwise the last attempt's.
//
// errors.Is(err, ErrBudgetSpent) holds, and errors.Is/As see Last too.
type BudgetError struct {
	Attempts int
	Last     error
	Deadline bool
}

func (e *BudgetError) Error() string {
	why := "attempts spent"
	if e.Deadline {
		why = "deadline reached"
	}
	return fmt.Sprintf("retry budget spent (%s after %d attempts): last error: %v", why, e.Attempts, e.Last)
}

func (e *BudgetError) GRPCStatus() *status.Status {
	if e.Deadline {
		return status.New(codes.DeadlineExceeded, e.Error())
	}
	return status.Convert(e.Last)
}

func (e *BudgetError) Unwrap() []error {
	if e.Deadline {
		return []error{ErrBudgetSpent, e.Last, context.DeadlineExceeded}
	}
	return []error{ErrBudgetSpent, e.Last}
}

func statusText(st *status.Status) string { return st.Code().String() + ": " + st.Message() }

// decodeError turns a gRPC status error into the SDK's types. Context
// errors and errors without a status pass through.
func decodeError(err error, key string) error {
	if err == nil {
		return nil
	}
	var budget *BudgetError
	if errors.As(err, &budget) {
		budget.Last = decodeError(budget.Last, key)
		return budget
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	info := errorInfo(st)
	switch {
	case st.Code() == codes.InvalidArgument && info.GetReason() == reasonKeyReused:
		return &KeyReusedError{Key: key, Status: st}
	case st.Code() == codes.FailedPrecondition && info.GetReason() == reasonStatusConflict:
		md := info.GetMetadata()
		return &PreconditionError{JobID: md["job_id"], JobStatus: oncejobv1.JobStatus(oncejobv1.JobStatus_value[md["status"]]), Status: st}
	case st.Code() == codes.InvalidArgument:
		e := &InvalidRequestError{Reason: info.GetReason(), Status: st}
		for _, d := range st.Details() {
			if br, ok := d.(*errdetails.BadRequest); ok {
				for _, v := range br.GetFieldViolations() {
					e.Violations = append(e.Violations, FieldViolation{Field: v.GetField(), Description: v.GetDescription()})
				}
			}
		}
		return e
	}
	return &StatusError{Status: st}
}

// errorInfo returns the status's ErrorInfo, or nil.
func errorInfo(st *status.Status) *errdetails.ErrorInfo {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}
