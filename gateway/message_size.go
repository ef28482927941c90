package gateway

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// sizedConn refuses, before sending, a request the gRPC server would refuse
// for its size: a body within MaxBodyBytes can still decode to a message
// over the server's receive limit (JSON text of an 8.5 MiB document), and
// the server's answer to that, RESOURCE_EXHAUSTED, is the rate limit's
// (429 with Retry-After) though no retry can succeed. The gateway answers
// 413 instead.
type sizedConn struct {
	grpc.ClientConnInterface
	max int
}

// errMessageTooLarge is a request larger than the server receives.
type errMessageTooLarge struct{ size, max int }

func (e *errMessageTooLarge) Error() string {
	return fmt.Sprintf("the request is %d bytes as protobuf, over the server's limit of %d", e.size, e.max)
}

func (c sizedConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	if m, ok := args.(proto.Message); ok {
		if n := proto.Size(m); n > c.max {
			return &errMessageTooLarge{size: n, max: c.max}
		}
	}
	return c.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
}

// messageTooLarge returns the problem of err when it is a request over
// the server's size limit.
func messageTooLarge(err error) (*problem, bool) {
	var tooLarge *errMessageTooLarge
	if !errors.As(err, &tooLarge) {
		return nil, false
	}
	p := bodyTooLarge(int64(tooLarge.max), tooLarge.Error())
	p.Detail = tooLarge.Error() + " (--max-document-bytes plus 1 MiB)"
	return p, true
}
