package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
)

// ReasonKeyRevoked is the ErrorInfo reason of a stream ended because its
// key was revoked (or is no longer known) after the stream began.
const ReasonKeyRevoked = "API_KEY_REVOKED"

// errStreamRevoked carries the status a stream ends with as the cause of
// its context's cancellation.
type errStreamRevoked struct{ st *status.Status }

func (e errStreamRevoked) Error() string { return e.st.Message() }

// recheckStreamInterceptor ends an open stream whose caller would be
// refused now: every interval it authenticates the stream's metadata again
// (through the key cache, so most checks read no store) and ends the
// stream with UNAUTHENTICATED when the key was revoked, or PERMISSION_DENIED
// when its role no longer allows the method. A store that cannot be read
// leaves the stream open: it cannot revoke anything either. See "Revoking
// a key" in docs/architecture.md. It runs after auth and authz.
func recheckStreamInterceptor(authFunc auth.AuthFunc, interval time.Duration, logger *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, cancel := context.WithCancelCause(ss.Context())
		defer cancel(nil)
		// A timer rather than a goroutine per stream: a thousand idle
		// watches hold a thousand timers, and a check runs only when due.
		var (
			mu      sync.Mutex
			stopped bool
			timer   *time.Timer
		)
		mu.Lock() // the callback reads timer
		timer = time.AfterFunc(interval, func() {
			if st := recheck(ctx, authFunc, info.FullMethod); st != nil {
				p, _ := tenant.PrincipalFromContext(ss.Context())
				logger.InfoContext(ctx, "stream ended: its key is no longer allowed", "tenant", p.Tenant, "key", p.KeyPrefix, "rpc", info.FullMethod, "code", st.Code().String())
				cancel(errStreamRevoked{st})
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if !stopped {
				timer.Reset(interval)
			}
		})
		mu.Unlock()
		defer func() {
			mu.Lock()
			stopped = true
			timer.Stop()
			mu.Unlock()
		}()
		wrapped := middleware.WrapServerStream(ss)
		wrapped.WrappedContext = ctx
		err := handler(srv, wrapped)
		var revoked errStreamRevoked
		if errors.As(context.Cause(ctx), &revoked) {
			return revoked.st.Err()
		}
		return err
	}
}

// recheck returns the status a stream of method with ctx's metadata would
// be refused with now, or nil.
func recheck(ctx context.Context, authFunc auth.AuthFunc, method string) *status.Status {
	before, _ := tenant.PrincipalFromContext(ctx)
	now, err := authFunc(ctx)
	if err != nil {
		st := status.Convert(err)
		if st.Code() != codes.Unauthenticated {
			return nil // the store cannot say: it cannot revoke either
		}
		revoked, _ := status.New(codes.Unauthenticated, "the API key of this stream was revoked or is no longer known").
			WithDetails(&errdetails.ErrorInfo{Reason: ReasonKeyRevoked, Domain: errorDomain, Metadata: map[string]string{"key": before.KeyPrefix}})
		return revoked
	}
	p, _ := tenant.PrincipalFromContext(now)
	if p.Tenant != before.Tenant {
		return status.New(codes.Unauthenticated, "the API key of this stream no longer names its tenant")
	}
	if need := requiredRole(method); need == store.RoleOperator && p.Role != store.RoleOperator {
		denied, _ := status.Newf(codes.PermissionDenied, "%s needs an operator key; key %s is now a %s key", method, p.KeyPrefix, p.Role).
			WithDetails(&errdetails.ErrorInfo{Reason: ReasonRoleNotPermitted, Domain: errorDomain, Metadata: map[string]string{
				"method": method, "role": string(p.Role), "required_role": string(need), "key": p.KeyPrefix,
			}})
		return denied
	}
	return nil
}
