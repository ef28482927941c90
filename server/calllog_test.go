package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/server/requestid"
)

// TestCallLogUnaryIsTheMiddlewaresLine: callLogUnary writes, for a unary
// call, the line go-grpc-middleware's logging interceptor wrote before it
// (the chain's options): the same message, keys in the same order, the
// same values but the timings, at the same level.
func TestCallLogUnaryIsTheMiddlewaresLine(t *testing.T) {
	for _, c := range []struct {
		name     string
		err      error
		deadline bool
	}{
		{"ok", nil, false},
		{"not found, deadline", status.Error(codes.NotFound, "no job"), true},
		{"internal", status.Error(codes.Internal, "boom"), false},
		{"plain error", errors.New("plain"), false},
		{"refused", status.Error(codes.Unauthenticated, "who"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mw, ours bytes.Buffer
			logger := func(b *bytes.Buffer) *slog.Logger {
				return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
			}
			info := &grpc.UnaryServerInfo{FullMethod: "/oncejob.v1.JobService/SubmitJob"}
			handler := func(context.Context, any) (any, error) { return "resp", c.err }
			ctx := callContext(t, c.deadline)
			opts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall), logging.WithFieldsFromContext(logFields)}
			_, err := logging.UnaryServerInterceptor(boundRefusals(slogAdapter(logger(&mw)), newRefusalBound()), opts...)(ctx, "req", info, handler)
			require.Equal(t, c.err, err)
			resp, err := callLogUnary(logger(&ours), newRefusalBound())(ctx, "req", info, handler)
			require.Equal(t, c.err, err)
			require.Equal(t, "resp", resp)

			want, got := keysValues(t, mw.Bytes()), keysValues(t, ours.Bytes())
			require.Equal(t, len(want), len(got), "middleware %s\nours %s", mw.String(), ours.String())
			for i := range want {
				require.Equal(t, want[i][0], got[i][0], "key %d", i)
				switch want[i][0] {
				case "time", "grpc.time_ms", "grpc.start_time":
					continue
				}
				require.Equal(t, want[i][1], got[i][1], "value of %s", want[i][0])
			}
		})
	}
}

// callContext is a call's context as the chain has it at the call log: a
// peer, a request id, a log holder with a tenant, and maybe a deadline.
func callContext(t *testing.T, deadline bool) context.Context {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}})
	var ctxOut context.Context
	_, err := requestid.UnaryServerInterceptor()(ctx, nil, &grpc.UnaryServerInfo{}, func(c context.Context, _ any) (any, error) {
		ctxOut = c
		return nil, nil
	})
	require.NoError(t, err)
	h := &logHolder{}
	tn := "acme"
	h.tenant.Store(&tn)
	ctxOut = context.WithValue(ctxOut, logHolderKey{}, h)
	if deadline {
		var cancel context.CancelFunc
		ctxOut, cancel = context.WithTimeout(ctxOut, time.Hour)
		t.Cleanup(cancel)
	}
	return ctxOut
}

// keysValues are a JSON line's keys and values, in order.
func keysValues(t *testing.T, line []byte) [][2]string {
	dec := json.NewDecoder(bytes.NewReader(line))
	tok, err := dec.Token()
	require.NoError(t, err, "%s", line)
	require.Equal(t, json.Delim('{'), tok)
	var out [][2]string
	for dec.More() {
		k, err := dec.Token()
		require.NoError(t, err)
		var v any
		require.NoError(t, dec.Decode(&v))
		out = append(out, [2]string{k.(string), fmt.Sprint(v)})
	}
	return out
}

// TestTimeMillis: grpc.time_ms is written as the middleware writes it.
func TestTimeMillis(t *testing.T) {
	for _, d := range []time.Duration{0, time.Nanosecond, 999, time.Microsecond, 1234567, 4344 * time.Microsecond,
		time.Second, 90 * time.Second, 3 * time.Hour, 1e7 * time.Second} {
		want := fmt.Sprintf("%v", float32(d.Nanoseconds()/1000)/1000)
		require.Equal(t, want, timeMillis(d), "%s", d)
	}
}

// BenchmarkCallLog is the call log's cost per call, the middleware's and
// callLogUnary's, writing JSON lines to a discarded buffer.
func BenchmarkCallLog(b *testing.B) {
	info := &grpc.UnaryServerInfo{FullMethod: "/oncejob.v1.JobService/SubmitJob"}
	handler := func(context.Context, any) (any, error) { return "resp", nil }
	ctx := callContext(&testing.T{}, false)
	logger := slog.New(slog.NewJSONHandler(discard{}, nil))
	opts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall), logging.WithFieldsFromContext(logFields)}
	for _, c := range []struct {
		name string
		i    grpc.UnaryServerInterceptor
	}{
		{"middleware", logging.UnaryServerInterceptor(boundRefusals(slogAdapter(logger), newRefusalBound()), opts...)},
		{"callLogUnary", callLogUnary(logger, newRefusalBound())},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = c.i(ctx, "req", info, handler)
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
