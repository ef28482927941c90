package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
)

// DefaultStoreTimeout is serve's --store-timeout.
const DefaultStoreTimeout = 30 * time.Second

// errStoreTimeout is the cause of a unary call's context when the server's
// own bound ran out: the store did not answer in time, whatever the
// caller's deadline.
var errStoreTimeout = errors.New("the job store did not answer within the server's store timeout")

// storeTimeoutInterceptor bounds each unary call's work, so a store that
// stops answering (a network partition, a commit stalled on its way) holds
// neither a handler nor a caller without a deadline for longer than d. A
// caller's sooner deadline stays in force and is answered DEADLINE_EXCEEDED;
// the server's own bound is answered as the outage it is: UNAVAILABLE with
// STORE_UNAVAILABLE, retry with the same key.
func storeTimeoutInterceptor(d time.Duration) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if d <= 0 {
			return handler(ctx, req)
		}
		ctx, cancel := context.WithTimeoutCause(ctx, d, errStoreTimeout)
		defer cancel()
		return handler(ctx, req)
	}
}
