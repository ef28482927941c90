package clientsdk

import (
	"context"
	"errors"
	"strings"
	"time"

	grpcretry "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/retry"
)

// RetryPolicy bounds the retries of one call: by attempts, and always by
// the context's deadline, which cuts a wait rather than letting it run past
// (the call then ends at the deadline with a *BudgetError). Zero fields take
// the defaults stated.
//
// The wait before retry n is a uniform random duration in
// [0, min(MaxBackoff, InitialBackoff * Multiplier^(n-1))) ("full jitter"),
// or exactly the delay of a google.rpc.RetryInfo the server sent with the
// error, which is the server's word on when to come back.
type RetryPolicy struct {
	// MaxAttempts counts every attempt, the first included; default 6.
	// 1 turns retries off.
	MaxAttempts int
	// InitialBackoff caps the first wait; default 100ms.
	InitialBackoff time.Duration
	// MaxBackoff caps every wait but a RetryInfo delay; default 5s.
	MaxBackoff time.Duration
	// Multiplier grows the cap from one retry to the next; default 2.
	Multiplier float64
	// AttemptTimeout bounds one attempt; default none, so one attempt may
	// use the whole deadline. With it an attempt that runs out is retried.
	AttemptTimeout time.Duration
	// Jitter returns the fraction of the cap to wait, in [0, 1); default
	// a uniform random one. Tests pin it to make waits exact.
	Jitter func() float64
	// OnRetry, if set, is called after a failed attempt with the wait
	// before the next one, before waiting.
	OnRetry func(RetryEvent)
}

// RetryEvent describes a failed attempt that will be retried.
type RetryEvent struct {
	Attempt int           // the attempt that failed, from 1
	Err     error         // its error
	Wait    time.Duration // the wait before the next attempt
}

// DefaultRetryPolicy is the policy of a Client without WithRetryPolicy.
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 6, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, Multiplier: 2}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.InitialBackoff <= 0 {
		p.InitialBackoff = d.InitialBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = d.MaxBackoff
	}
	if p.Multiplier < 1 {
		p.Multiplier = d.Multiplier
	}
	if p.Jitter == nil {
		p.Jitter = retry.Jitter
	}
	return p
}

// wait returns how long to wait before retry n (n >= 1) after err, and
// reports it to OnRetry.
func (p RetryPolicy) wait(n int, err error) time.Duration {
	d, ok := retryInfoDelay(err)
	if !ok {
		d = retry.Backoff{Initial: p.InitialBackoff, Max: p.MaxBackoff, Multiplier: p.Multiplier}.Wait(n, p.Jitter())
	}
	if p.OnRetry != nil {
		p.OnRetry(RetryEvent{Attempt: n, Err: err, Wait: d})
	}
	return d
}

// retryInfoDelay returns the delay of the RetryInfo in err's status.
func retryInfoDelay(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return max(ri.GetRetryDelay().AsDuration(), 0), true
		}
	}
	return 0, false
}

// retryable says whether an attempt that failed with err may be made again.
// Every call the SDK makes is read-only or carries an idempotency key fixed
// for the whole call, so a retry of an attempt whose outcome is unknown — a
// deadline, a broken connection — is a replay, never a second effect.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded:
		return true
	case codes.Internal:
		// A stream reset by a proxy or a dying peer, after the request may
		// have been sent.
		return strings.Contains(status.Convert(err).Message(), "RST_STREAM")
	}
	return false
}

// invoke makes one logical unary call: every attempt carries the same
// metadata (so the same idempotency key), through go-grpc-middleware's
// retry interceptor driven by p.
func invoke(ctx context.Context, conn grpc.ClientConnInterface, p RetryPolicy, method string, req, reply any, opts ...grpc.CallOption) error {
	var attempts, waits int
	var last error
	invoker := func(ctx context.Context, method string, req, reply any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
		attempts++
		last = conn.Invoke(ctx, method, req, reply, opts...)
		return last
	}
	interceptor := grpcretry.UnaryClientInterceptor(
		grpcretry.WithMax(uint(p.MaxAttempts)),
		grpcretry.WithBackoff(func(_ context.Context, n uint) time.Duration { waits++; return p.wait(int(n), last) }),
		grpcretry.WithRetriable(retryable),
		grpcretry.WithPerRetryTimeout(p.AttemptTimeout),
	)
	err := interceptor(ctx, method, req, reply, nil, invoker, opts...)
	return budgetError(ctx, err, last, attempts, waits, p)
}

// budgetError wraps err in a *BudgetError when retrying is what ended the
// call: the deadline came during a wait (as many waits begun as attempts
// made) or after a retried attempt, or the attempts ran out on a retryable
// error.
func budgetError(ctx context.Context, err, last error, attempts, waits int, p RetryPolicy) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && last != nil && (attempts > 1 || waits == attempts):
		return &BudgetError{Attempts: attempts, Last: last, Deadline: true}
	case attempts >= p.MaxAttempts && p.MaxAttempts > 1 && retryable(last):
		return &BudgetError{Attempts: attempts, Last: last}
	}
	return err
}
