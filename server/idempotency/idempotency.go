// Package idempotency reads, validates and scopes the `idempotency-key` gRPC
// metadata, and marks replays in the response header. The store makes a key
// atomic; this package only decides what the key is.
package idempotency

import (
	"context"
	"sync/atomic"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/server/tenant"
)

const (
	// MetadataKey carries the client's key.
	MetadataKey = "idempotency-key"
	// ReplayedHeader is set to "true" on a response that replays a key.
	ReplayedHeader = "idempotent-replayed"
	// MaxKeyLen is the longest key accepted.
	MaxKeyLen = 255
	// ErrorDomain is the ErrorInfo domain of this package's errors.
	ErrorDomain = "oncejob.dev"
	// ReasonKeyInvalid is the ErrorInfo reason for a missing or malformed key.
	ReasonKeyInvalid = "IDEMPOTENCY_KEY_INVALID"
	// ReasonKeyReused is the ErrorInfo reason for a key replayed with another
	// request.
	ReasonKeyReused = "IDEMPOTENCY_KEY_REUSED"
)

// Key is a validated idempotency key and its scope.
type Key struct {
	Tenant string
	Method string // the full gRPC method
	Value  string
}

type ctxKey struct{}

type scoped struct {
	key      Key
	replayed atomic.Bool
}

// FromContext returns the RPC's key, if the client sent one.
func FromContext(ctx context.Context) (Key, bool) {
	s, ok := ctx.Value(ctxKey{}).(*scoped)
	if !ok {
		return Key{}, false
	}
	return s.key, true
}

// MarkReplayed records that the RPC returned a stored result; the
// interceptor then sets the ReplayedHeader.
func MarkReplayed(ctx context.Context) {
	if s, ok := ctx.Value(ctxKey{}).(*scoped); ok {
		s.replayed.Store(true)
	}
}

// UnaryServerInterceptor validates the key of every unary RPC that sends one
// and requires it on the given full method names. It must run after
// authentication: the key is scoped by the caller's tenant.
func UnaryServerInterceptor(requiredOn ...string) grpc.UnaryServerInterceptor {
	required := make(map[string]bool, len(requiredOn))
	for _, m := range requiredOn {
		required[m] = true
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		value, present := fromMetadata(ctx)
		if !present {
			if required[info.FullMethod] {
				return nil, invalidKey("the idempotency-key metadata is required on this method")
			}
			return handler(ctx, req)
		}
		if msg := Check(value); msg != "" {
			return nil, invalidKey(msg)
		}
		t, ok := tenant.FromContext(ctx)
		if !ok {
			return nil, status.Error(codes.Internal, "idempotency: no tenant in context")
		}
		s := &scoped{key: Key{Tenant: t, Method: info.FullMethod, Value: value}}
		resp, err := handler(context.WithValue(ctx, ctxKey{}, s), req)
		if err == nil && s.replayed.Load() {
			_ = grpc.SetHeader(ctx, metadata.Pairs(ReplayedHeader, "true"))
		}
		return resp, err
	}
}

func fromMetadata(ctx context.Context) (string, bool) {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return "", false
	}
	v := md.Get(MetadataKey)
	if len(v) == 0 {
		return "", false
	}
	if len(v) > 1 {
		return "\x00", true // several keys: malformed
	}
	return v[0], true
}

// Check returns why value is not a valid key, or "" when it is one.
func Check(value string) string {
	if len(value) == 0 || len(value) > MaxKeyLen {
		return "the idempotency-key must be 1-255 characters"
	}
	for i := 0; i < len(value); i++ {
		if value[i] < 0x20 || value[i] > 0x7e {
			return "the idempotency-key must be printable ASCII and sent once"
		}
	}
	return ""
}

func invalidKey(msg string) error {
	st := status.New(codes.InvalidArgument, msg)
	st, _ = st.WithDetails(
		&errdetails.ErrorInfo{Reason: ReasonKeyInvalid, Domain: ErrorDomain, Metadata: map[string]string{"metadata_key": MetadataKey}},
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "metadata." + MetadataKey, Description: msg}}},
	)
	return st.Err()
}

// ReusedError is the INVALID_ARGUMENT a handler returns when the store finds
// the key bound to another request.
func ReusedError() error {
	return ReusedStatus("metadata_key", MetadataKey).Err()
}

// ReusedStatus is ReusedError's status, whose ErrorInfo metadata says where
// the key was sent: under "metadata_key" for the metadata, under "field"
// for a field of the request (a SubmitJobs item's key).
func ReusedStatus(where, name string) *status.Status {
	st := status.New(codes.InvalidArgument, "this idempotency-key was already used with a different request; use a new key for a new request")
	st, _ = st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonKeyReused, Domain: ErrorDomain, Metadata: map[string]string{where: name}})
	return st
}
