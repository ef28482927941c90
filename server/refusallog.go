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
func boundRefusals(l logging.Logger) logging.Logger {
	every := &rate.Sometimes{Interval: time.Second}
	var left atomic.Int64
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
		logged := false
		every.Do(func() {
			logged = true
			l.Log(ctx, lvl, msg, append(fields, "refusals_not_logged", left.Swap(0))...)
		})
		if !logged {
			left.Add(1)
		}
	})
}
