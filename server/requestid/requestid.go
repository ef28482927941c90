// Package requestid gives every RPC an x-request-id: the client's when it
// sends a sane one, else a new one. It is echoed in the response header and
// carried in the context for logs.
package requestid

import (
	"context"

	"github.com/google/uuid"
	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// MetadataKey is the metadata key in both directions.
const MetadataKey = "x-request-id"

type ctxKey struct{}

// FromContext returns the RPC's request id.
func FromContext(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// UnaryServerInterceptor sets the request id of unary RPCs.
func UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx = withRequestID(ctx)
		return handler(ctx, req)
	}
}

// StreamServerInterceptor sets the request id of streaming RPCs.
func StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		wrapped := middleware.WrapServerStream(ss)
		wrapped.WrappedContext = withRequestID(ss.Context())
		return handler(srv, wrapped)
	}
}

func withRequestID(ctx context.Context) context.Context {
	id := ""
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(MetadataKey); len(v) > 0 && Valid(v[0]) {
			id = v[0]
		}
	}
	if id == "" {
		id = uuid.NewString()
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs(MetadataKey, id))
	return context.WithValue(ctx, ctxKey{}, id)
}

// Valid reports whether s is a request id a client may choose: 1-128
// printable ASCII characters without spaces, so it cannot inject into logs.
func Valid(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
