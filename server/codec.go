package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/oncejob/oncejob/server/membudget"
)

// ReasonMalformedMessage is the ErrorInfo reason of a request that is not
// valid protobuf for its method.
const ReasonMalformedMessage = "MALFORMED_MESSAGE"

// requestCodec is grpc's proto codec for the server's requests, except in
// what a request that does not decode gets. grpc-go answers a codec's
// error INTERNAL, before any interceptor runs, so such a request was in
// neither the logs nor the metrics, and INTERNAL blames the server for the
// caller's bytes (invalid UTF-8 in a string field, garbage, nesting deeper
// than protobuf's limit of 10,000). Instead the codec hands the handler an
// empty message and remembers why; the first interceptor after the metrics
// finds it (malformedUnary, malformedStream) and answers INVALID_ARGUMENT,
// counted, with a log line at most once a second. It runs before
// authentication, so it costs a map operation.
//
// It also counts a request's bytes in the memory budget before decoding
// them (docs/operations.md, "Request bodies and timeouts"): a message the
// budget cannot hold now is not decoded, and its call is answered
// RESOURCE_EXHAUSTED (MEMORY_BUDGET, retryable); the bytes of one that is
// are held until its call ends (a stream's, until it is received).
type requestCodec struct {
	encoding.CodecV2
	bad    sync.Map // proto.Message → error, until the interceptor takes it
	held   sync.Map // proto.Message → int64 bytes drawn from memory
	memory *membudget.Budget

	count      atomic.Int64
	suppressed atomic.Int64
	logEvery   rate.Sometimes
	logger     *slog.Logger
}

func newRequestCodec(logger *slog.Logger, memory *membudget.Budget) *requestCodec {
	return &requestCodec{CodecV2: encoding.GetCodecV2(grpcproto.Name), logger: logger, logEvery: rate.Sometimes{Interval: time.Second}, memory: memory}
}

// errOverBudget marks a message the memory budget could not hold.
type errOverBudget struct{ err error }

func (e errOverBudget) Error() string { return e.err.Error() }

// Unmarshal decodes data into v; when it cannot, v is left empty and the
// error is kept for the interceptor.
func (c *requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return c.CodecV2.Unmarshal(data, v)
	}
	n := int64(data.Len())
	if !c.memory.TryAcquire(n) {
		c.bad.Store(m, errOverBudget{c.memory.Exhausted("a request of this size", n)})
		return nil
	}
	err := c.CodecV2.Unmarshal(data, v)
	if err != nil {
		c.memory.Release(n)
		proto.Reset(m)
		c.bad.Store(m, err)
		return nil
	}
	if n > 0 && c.memory != nil {
		c.held.Store(m, n)
	}
	return nil
}

// release gives back what req's bytes drew from the memory budget.
func (c *requestCodec) release(req any) {
	if n, ok := c.held.LoadAndDelete(req); ok {
		c.memory.Release(n.(int64))
	}
}

// Malformed counts the requests refused because they did not decode.
func (c *requestCodec) Malformed() int64 { return c.count.Load() }

// refusal returns the status of a request that did not decode, or nil.
func (c *requestCodec) refusal(ctx context.Context, method string, req any) error {
	v, ok := c.bad.LoadAndDelete(req)
	if !ok {
		return nil
	}
	err := v.(error)
	var over errOverBudget
	if errors.As(err, &over) {
		return over.err
	}
	c.count.Add(1)
	logged := false
	c.logEvery.Do(func() {
		logged = true
		c.logger.WarnContext(ctx, "malformed request refused", "rpc", method, "error", err.Error(), "suppressed_since_last", c.suppressed.Swap(0))
	})
	if !logged {
		c.suppressed.Add(1)
	}
	st, _ := status.Newf(codes.InvalidArgument, "the request is not a valid %T: %v", req, err).
		WithDetails(&errdetails.ErrorInfo{Reason: ReasonMalformedMessage, Domain: errorDomain, Metadata: map[string]string{"method": method}})
	return st.Err()
}

func (c *requestCodec) malformedUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	defer c.release(req)
	if err := c.refusal(ctx, info.FullMethod, req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (c *requestCodec) malformedStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &checkedStream{ServerStream: ss, codec: c, method: info.FullMethod})
}

type checkedStream struct {
	grpc.ServerStream
	codec  *requestCodec
	method string
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	s.codec.release(m) // a stream's request is small and read once
	return s.codec.refusal(s.Context(), s.method, m)
}
