package server

import (
	"context"
	"sync/atomic"

	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"

	"github.com/oncejob/oncejob/server/requestid"
	"github.com/oncejob/oncejob/server/tenant"
)

// The logging interceptor logs with the context it was given, which sits
// outside authentication. A holder placed first in the chain lets the auth
// function record the tenant where the log line will find it.
type logHolder struct{ tenant atomic.Pointer[string] }

type logHolderKey struct{}

func withLogHolder(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return handler(context.WithValue(ctx, logHolderKey{}, &logHolder{}), req)
}

func withLogHolderStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	wrapped := middleware.WrapServerStream(ss)
	wrapped.WrappedContext = context.WithValue(ss.Context(), logHolderKey{}, &logHolder{})
	return handler(srv, wrapped)
}

func withLogTenant(f auth.AuthFunc) auth.AuthFunc {
	return func(ctx context.Context) (context.Context, error) {
		ctx, err := f(ctx)
		if err != nil {
			return nil, err
		}
		if h, ok := ctx.Value(logHolderKey{}).(*logHolder); ok {
			if t, ok := tenant.FromContext(ctx); ok {
				h.tenant.Store(&t)
			}
		}
		return ctx, nil
	}
}

func logFields(ctx context.Context) logging.Fields {
	f := logging.Fields{"request_id", requestid.FromContext(ctx)}
	if h, ok := ctx.Value(logHolderKey{}).(*logHolder); ok {
		if t := h.tenant.Load(); t != nil {
			f = append(f, "tenant", *t)
		}
	}
	return f
}
