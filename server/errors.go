package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/jobspec"
	"github.com/oncejob/oncejob/server/idempotency"
	"github.com/oncejob/oncejob/server/requestid"
	"github.com/oncejob/oncejob/store"
)

// errorDomain is the ErrorInfo domain of oncejob's errors.
const errorDomain = idempotency.ErrorDomain

// violations collects BadRequest field violations.
type violations []*errdetails.BadRequest_FieldViolation

func (v *violations) add(field, format string, args ...any) {
	*v = append(*v, &errdetails.BadRequest_FieldViolation{Field: field, Description: fmt.Sprintf(format, args...)})
}

// prefixed returns v with prefix before every field: the path of the
// message they are in, within the request.
func (v violations) prefixed(prefix string) violations {
	for _, fv := range v {
		fv.Field = prefix + fv.Field
	}
	return v
}

// addSpec adds jobspec's violations, in their order.
func (v *violations) addSpec(fs jobspec.Violations) {
	for _, fe := range fs {
		v.add(fe.Field, "%s", fe.Description)
	}
}

// specError maps an error of jobspec to a status: a *jobspec.Error is
// INVALID_ARGUMENT with a BadRequest of its violations, as the validation
// interceptor answers; anything else is INTERNAL.
func specError(err error) error {
	var je *jobspec.Error
	if errors.As(err, &je) {
		var v violations
		v.addSpec(je.Violations)
		if err := v.err(); err != nil {
			return err
		}
	}
	return status.Errorf(codes.Internal, "job params: %v", err)
}

// err returns INVALID_ARGUMENT with a BadRequest of every violation, or nil.
func (v violations) err() error {
	if len(v) == 0 {
		return nil
	}
	msg := "invalid request: " + v[0].Field + ": " + v[0].Description
	if len(v) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(v)-1)
	}
	st, _ := status.New(codes.InvalidArgument, msg).WithDetails(&errdetails.BadRequest{FieldViolations: v})
	return st.Err()
}

// storeError maps a store error to a status. Sentinels become their codes;
// the caller's cancellation and deadline theirs; anything else — the
// server's own store timeout included — is UNAVAILABLE with an ErrorInfo
// STORE_UNAVAILABLE and the request id, its text only in the log.
func (s *jobService) storeError(ctx context.Context, err error, what string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return status.Errorf(codes.NotFound, "%s not found", what)
	case errors.Is(err, store.ErrIdempotencyKeyReused):
		return idempotency.ReusedError()
	case errors.Is(err, store.ErrInvalidRow):
		s.cfg.Logger.WarnContext(ctx, "store refused a value", "error", err, "request_id", requestid.FromContext(ctx))
		st, _ := status.Newf(codes.InvalidArgument, "the store refused a value of this %s; it will refuse it again", what).
			WithDetails(&errdetails.ErrorInfo{Reason: "INVALID_VALUE", Domain: errorDomain})
		return st.Err()
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "request cancelled")
	case errors.Is(err, context.DeadlineExceeded) && !errors.Is(context.Cause(ctx), errStoreTimeout):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	}
	rid := requestid.FromContext(ctx)
	s.cfg.Logger.ErrorContext(ctx, "store error", "error", err, "request_id", rid)
	st, _ := status.New(codes.Unavailable, "the job store is unavailable; retry with the same idempotency key").
		WithDetails(&errdetails.ErrorInfo{Reason: "STORE_UNAVAILABLE", Domain: errorDomain, Metadata: map[string]string{"request_id": rid}})
	return st.Err()
}

// addOnce adds a violation unless field already has one, so a rule checked
// both generically and by an RPC's own rules is reported once.
func (v *violations) addOnce(field, format string, args ...any) {
	for _, fv := range *v {
		if fv.Field == field {
			return
		}
	}
	v.add(field, format, args...)
}
