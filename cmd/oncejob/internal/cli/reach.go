package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/clientsdk"
	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
)

// What a newcomer's first mistakes with --addr look like, said in their
// words rather than grpc-go's (issue 30): no server at the address, the
// HTTP port given for the gRPC one, a URL for a host:port.

// unreachable starts the message of a call that found no server.
const unreachable = "cannot reach oncejob at "

// checkAddr refuses an --addr that is not host:port (several,
// comma-separated, for replicas): a URL such as http://host:8080 names the
// HTTP API, which the CLI does not speak. grpc-go's own targets
// (dns:///host:port, unix:path) pass.
func checkAddr(addr string) error {
	for _, a := range strings.Split(addr, ",") {
		lower := strings.ToLower(a)
		switch {
		case strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://"):
			return cmdline.UsageError("--addr %q: give host:port, not a URL: the CLI speaks gRPC, to the port of serve's --grpc-addr (127.0.0.1:7070 by default); http:// is the HTTP API's", a)
		case strings.Contains(a, "://") || strings.HasPrefix(lower, "unix:"):
		default:
			if _, _, err := net.SplitHostPort(a); err != nil {
				return cmdline.UsageError("--addr %q: want host:port (%v)", a, err)
			}
		}
	}
	return nil
}

// explainDialOptions rewrites, on every attempt, the transport errors
// grpc-go reports for a wrong address: a refused or failed dial stays
// UNAVAILABLE (a server that restarts is worth the retries) with the hint,
// and an HTTP/1 answer - the console's port - becomes FAILED_PRECONDITION,
// which no retry changes.
func explainDialOptions(addr string) []grpc.DialOption {
	explain := func(err error) error {
		st, ok := status.FromError(err)
		if !ok || st.Code() != codes.Unavailable {
			return err
		}
		msg := st.Message()
		switch {
		case strings.Contains(msg, "http2: frame too large") || strings.Contains(msg, "error reading server preface"):
			return status.Errorf(codes.FailedPrecondition, "%s answers HTTP/1, not gRPC: that looks like oncejob's HTTP port (serve --http-addr); "+
				"give --addr the gRPC port (serve --grpc-addr, 127.0.0.1:7070 by default)", addr)
		case strings.Contains(msg, "Error while dialing") || strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host"):
			cause := msg
			if i := strings.LastIndex(msg, "dial "); i >= 0 {
				cause = strings.TrimSuffix(msg[i:], `"`)
			}
			return status.Errorf(codes.Unavailable, "%s%s: is 'oncejob serve' running? (--addr, ONCEJOB_ADDR) [%s]", unreachable, addr, cause)
		}
		return err
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return explain(invoker(ctx, method, req, reply, cc, opts...))
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, explain(err)
			}
			return &explainedStream{ClientStream: s, explain: explain}, nil
		}),
	}
}

type explainedStream struct {
	grpc.ClientStream
	explain func(error) error
}

func (s *explainedStream) RecvMsg(m any) error { return s.explain(s.ClientStream.RecvMsg(m)) }

// Explain is the error a client command ends with, in the user's words
// where it is about reaching the server: "cannot reach oncejob at ADDR:
// is 'oncejob serve' running? (--addr, ONCEJOB_ADDR)" first, the retries
// after; the HTTP port's answer as it is. Other errors pass unchanged.
func Explain(err error) error {
	var budget *clientsdk.BudgetError
	last := err
	if errors.As(err, &budget) {
		last = budget.Last
	}
	st, ok := status.FromError(last)
	if !ok {
		return err
	}
	msg := st.Message()
	switch {
	case st.Code() == codes.Unavailable && strings.HasPrefix(msg, unreachable):
		if budget != nil {
			msg += fmt.Sprintf(" (%d attempts)", budget.Attempts)
		}
		return cmdline.WithExitCode(cmdline.ExitCode(err), errors.New(msg))
	case st.Code() == codes.FailedPrecondition && strings.Contains(msg, "answers HTTP/1, not gRPC"):
		return cmdline.WithExitCode(cmdline.ExitCode(err), errors.New(msg))
	}
	return err
}
