package server

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
)

// boundRefusals passes the call log's lines on, except that those of calls
// refused with UNAUTHENTICATED pass at most once a second, each with how
// many were left out before it: a flood of made-up keys must not become a
// flood of log lines. tenant.Authenticator.Refused counts every refusal
// (oncejob_auth_refusals_total).
func boundRefusals(l logging.Logger, r *refusalBound) logging.Logger {
	unauthenticated := codes.Unauthenticated.String()
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		refused := false
		for i := 0; i+1 < len(fields); i += 2 {
			if fields[i] == "grpc.code" {
				refused = fields[i+1] == unauthenticated
				break
			}
		}
		if !refused {
			l.Log(ctx, lvl, msg, fields...)
			return
		}
		if pass, left := r.pass(); pass {
			l.Log(ctx, lvl, msg, append(fields, "refusals_not_logged", left)...)
		}
	})
}

// refusalBound is the bound of the refused calls' lines: one a second, for
// the edge's refusals, the streams' and the unary calls' (callLogUnary)
// together.
type refusalBound struct {
	every rate.Sometimes
	left  atomic.Int64
}

func newRefusalBound() *refusalBound {
	return &refusalBound{every: rate.Sometimes{Interval: time.Second}}
}

// pass says whether a refusal's line passes now, and how many were left
// out before it; one that does not pass is counted.
func (r *refusalBound) pass() (bool, int64) {
	var left int64
	logged := false
	r.every.Do(func() {
		logged = true
		left = r.left.Swap(0)
	})
	if !logged {
		r.left.Add(1)
	}
	return logged, left
}
