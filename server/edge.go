package server

import (
	"context"
	"strings"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/tap"

	"github.com/oncejob/oncejob/server/tenant"
)

// The edge of the server: what runs when a call's headers arrive, before
// grpc-go reads any byte of its message (docs/operations.md, "Request
// bodies and timeouts"). grpc-go reads a message whole, into memory, and
// decodes it before the first interceptor runs, so what must happen before
// that runs here, in the transport's InTapHandle:
//
//   - a caller surely refused (no key, a malformed, revoked or unknown
//     key: tenant.Authenticator.Precheck, from memory, never waiting on
//     the store: the tap runs on the connection's reader) is answered
//     UNAUTHENTICATED before its message is read;
//   - a call gets RequestReadTimeout to send its whole request message;
//     past it its context ends, which ends the read (a message trickled a
//     byte at a time no longer holds its stream, or its bytes, forever).
//     readDeadlineStats lifts the deadline once the message is in.
//
// A key that needs a store read (not in the cache) is let through here
// and authenticated by the interceptor as before: its message is read
// first, bounded by the receive limit and counted in the memory budget
// (requestCodec).
type edge struct {
	auth        *tenant.Authenticator
	readTimeout time.Duration
	// log is the call log (boundRefusals): a refusal here is logged as
	// the interceptor's would be, at most once a second.
	log logging.Logger
}

// readTimer is the timer that ends a call whose request message is not in
// within RequestReadTimeout.
type readTimerKey struct{}

func (e *edge) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if needsAuthMethod(info.FullMethodName) {
		if err := e.auth.Precheck(info.Header); err != nil {
			service, method, _ := strings.Cut(strings.TrimPrefix(info.FullMethodName, "/"), "/")
			fields := []any{"protocol", "grpc", "grpc.component", "server", "grpc.service", service, "grpc.method", method,
				"grpc.code", codes.Unauthenticated.String(), "grpc.error", err.Error(), "refused_at", "headers"}
			if p, ok := peer.FromContext(ctx); ok {
				fields = append(fields, "peer.address", p.Addr.String())
			}
			e.log.Log(ctx, logging.LevelInfo, "finished call", fields...)
			return nil, err
		}
	}
	if e.readTimeout <= 0 {
		return ctx, nil
	}
	// The stream's own context ends when the stream does, which releases
	// this one; the timer is stopped when the message is in.
	ctx, cancel := context.WithCancel(ctx) //nolint:gosec // cancelled by the stream's end (its parent) or the timer
	timer := time.AfterFunc(e.readTimeout, cancel)
	return context.WithValue(ctx, readTimerKey{}, timer), nil
}

// needsAuthMethod reports whether a full method name needs a key: all but
// health and reflection (as the selector of the interceptor chain says).
func needsAuthMethod(method string) bool {
	for _, free := range []string{"/grpc.health.v1.Health/", "/grpc.reflection.v1.ServerReflection/", "/grpc.reflection.v1alpha.ServerReflection/"} {
		if len(method) >= len(free) && method[:len(free)] == free {
			return false
		}
	}
	return true
}

// readDeadlineStats lifts a call's request read deadline when its message
// is in (InPayload) or the call ends.
type readDeadlineStats struct{}

func (readDeadlineStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return ctx
}

func (readDeadlineStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	switch s.(type) {
	case *stats.InPayload, *stats.End:
		if t, ok := ctx.Value(readTimerKey{}).(*time.Timer); ok {
			t.Stop()
		}
	}
}

func (readDeadlineStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (readDeadlineStats) HandleConn(context.Context, stats.ConnStats) {}
