package server

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/server/requestid"
)

// callLogUnary is the call log of unary RPCs: the line go-grpc-middleware's
// logging interceptor writes on a finished call ("finished call", the same
// fields in the same order, its levels by code), made for a line per call:
// nothing is built when the logger would drop the line, and the line's
// attributes are built once, on the stack, with no intermediate field
// lists. Calls refused with UNAUTHENTICATED pass refusals (boundRefusals).
// Streams keep the middleware's interceptor.
func callLogUnary(l *slog.Logger, refusals *refusalBound) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		code := status.Code(err)
		level := slog.Level(logging.DefaultServerCodeToLevel(code))
		if !l.Enabled(ctx, level) {
			return resp, err
		}
		var left int64 = -1
		if code == codes.Unauthenticated {
			pass, n := refusals.pass()
			if !pass {
				return resp, err
			}
			left = n
		}
		logCall(ctx, l, level, info.FullMethod, start, code, err, left)
		return resp, err
	}
}

// logCall writes the line of a unary call to method that started at start
// and ended with code and err; left >= 0 adds refusals_not_logged.
func logCall(ctx context.Context, l *slog.Logger, level slog.Level, method string, start time.Time, code codes.Code, err error, left int64) {
	elapsed := time.Since(start)
	service, name := splitMethod(method)
	var buf [16]slog.Attr
	attrs := append(buf[:0], slog.String("request_id", requestid.FromContext(ctx)))
	if h, ok := ctx.Value(logHolderKey{}).(*logHolder); ok {
		if t := h.tenant.Load(); t != nil {
			attrs = append(attrs, slog.String("tenant", *t))
		}
	}
	attrs = append(attrs,
		slog.String("protocol", "grpc"),
		slog.String("grpc.component", "server"),
		slog.String("grpc.service", service),
		slog.String("grpc.method", name),
		slog.String("grpc.method_type", "unary"),
	)
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		attrs = append(attrs, slog.String("peer.address", p.Addr.String()))
	}
	attrs = append(attrs, slog.String("grpc.start_time", start.Format(time.RFC3339)))
	if d, ok := ctx.Deadline(); ok {
		attrs = append(attrs, slog.String("grpc.request.deadline", d.Format(time.RFC3339)))
	}
	attrs = append(attrs, slog.String("grpc.code", code.String()))
	if err != nil {
		attrs = append(attrs, slog.String("grpc.error", err.Error()))
	}
	attrs = append(attrs, slog.String("grpc.time_ms", timeMillis(elapsed)))
	if left >= 0 {
		attrs = append(attrs, slog.Int64("refusals_not_logged", left))
	}
	l.LogAttrs(ctx, level, "finished call", attrs...)
}

// splitMethod is the service and method of a full method name
// ("/pkg.Service/Method"), as go-grpc-middleware splits it.
func splitMethod(full string) (service, method string) {
	if service, method, ok := strings.Cut(strings.TrimPrefix(full, "/"), "/"); ok {
		return service, method
	}
	return "unknown", "unknown"
}

// timeMillis is grpc.time_ms as go-grpc-middleware writes it:
// fmt.Sprintf("%v", float32(microseconds)/1000).
func timeMillis(d time.Duration) string {
	return strconv.FormatFloat(float64(float32(d.Nanoseconds()/1000)/1000), 'g', -1, 32)
}
