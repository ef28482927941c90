package server

import (
	"context"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// Local runs the server's streaming RPCs in the caller's goroutine,
// through the same stream interceptor chain as a gRPC client's call (the
// one function value the grpc.Server runs too), with messages passed as
// values: no encoding, no transport, no goroutine of its own. The HTTP
// gateway serves its watches with it, so a watch over HTTP costs about what
// one over gRPC does, and answers exactly as gRPC would.
type Local struct {
	svc     oncejobv1.JobServiceServer
	chain   grpc.StreamServerInterceptor
	streams map[string]grpc.StreamHandler // by full method
}

func newLocal(svc oncejobv1.JobServiceServer, chain grpc.StreamServerInterceptor) *Local {
	l := &Local{svc: svc, chain: chain, streams: map[string]grpc.StreamHandler{}}
	desc := oncejobv1.JobService_ServiceDesc
	for _, s := range desc.Streams {
		l.streams["/"+desc.ServiceName+"/"+s.StreamName] = s.Handler
	}
	return l
}

// Stream calls the server-streaming method (a full method name, e.g.
// oncejobv1.JobService_WatchJob_FullMethodName) with req and the incoming
// metadata of ctx, as a gRPC client's call would arrive. onHeader gets the
// response headers once, when the handler sends them (or with its first
// message); onMsg gets each response, and an error it returns is the
// handler's Send error. Stream returns the call's status error, nil for OK.
// ctx ends the call.
func (l *Local) Stream(ctx context.Context, method string, req proto.Message, onHeader func(metadata.MD), onMsg func(proto.Message) error) error {
	handler, ok := l.streams[method]
	if !ok {
		return status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	s := &localStream{method: method, req: req, onHeader: onHeader, onMsg: onMsg}
	s.ctx = grpc.NewContextWithServerTransportStream(ctx, localTransportStream{s})
	info := &grpc.StreamServerInfo{FullMethod: method, IsServerStream: true}
	return l.chain(l.svc, s, info, handler)
}

// localStream is the server side of a Local call.
type localStream struct {
	ctx      context.Context
	method   string
	req      proto.Message
	received bool
	onHeader func(metadata.MD)
	onMsg    func(proto.Message) error

	mu     sync.Mutex
	header metadata.MD
	sent   bool // headers
}

var _ grpc.ServerStream = (*localStream)(nil)

func (s *localStream) Context() context.Context { return s.ctx }

func (s *localStream) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent {
		return status.Error(codes.Internal, "headers already sent")
	}
	s.header = metadata.Join(s.header, md)
	return nil
}

func (s *localStream) SendHeader(md metadata.MD) error {
	s.mu.Lock()
	if s.sent {
		s.mu.Unlock()
		return status.Error(codes.Internal, "headers already sent")
	}
	s.sent = true
	header := metadata.Join(s.header, md)
	s.mu.Unlock()
	s.onHeader(header)
	return nil
}

func (s *localStream) SetTrailer(metadata.MD) {} // nothing carries trailers here

func (s *localStream) SendMsg(m any) error {
	s.mu.Lock()
	sent := s.sent
	s.mu.Unlock()
	if !sent {
		if err := s.SendHeader(nil); err != nil {
			return err
		}
	}
	msg, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "%T is not a proto message", m)
	}
	return s.onMsg(msg)
}

// RecvMsg gives the request once, then io.EOF: a server-streaming call.
func (s *localStream) RecvMsg(m any) error {
	if s.received {
		return io.EOF
	}
	s.received = true
	dst, ok := m.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "%T is not a proto message", m)
	}
	proto.Merge(dst, s.req)
	return nil
}

// localTransportStream is what grpc.SetHeader and grpc.Method find in the
// context (grpc.ServerTransportStream's SetTrailer returns an error, so the
// stream cannot be it itself).
type localTransportStream struct{ s *localStream }

func (t localTransportStream) Method() string                  { return t.s.method }
func (t localTransportStream) SetHeader(md metadata.MD) error  { return t.s.SetHeader(md) }
func (t localTransportStream) SendHeader(md metadata.MD) error { return t.s.SendHeader(md) }
func (t localTransportStream) SetTrailer(metadata.MD) error    { return nil }

// chainStream composes interceptors into one, the first outermost, as
// grpc.ChainStreamInterceptor does; the grpc.Server and Local run the
// result, so their chains cannot differ.
func chainStream(interceptors ...grpc.StreamServerInterceptor) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		next := handler
		for i := len(interceptors) - 1; i >= 0; i-- {
			interceptor, inner := interceptors[i], next
			next = func(srv any, ss grpc.ServerStream) error { return interceptor(srv, ss, info, inner) }
		}
		return next(srv, ss)
	}
}
