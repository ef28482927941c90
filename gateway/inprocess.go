package gateway

import (
	"context"
	"net"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// inProcessBuffer is the in-memory pipe's buffer per direction.
const inProcessBuffer = 1 << 20

// inProcessConns is how many connections the gateway spreads its calls
// over. Each HTTP/2 connection has one writer and one reader goroutine on
// each side, through which all its streams pass: with a thousand watches
// on one, they queue behind each other.
const inProcessConns = 4

// maxResponseBytes bounds one response read from the server (a page of
// jobs with their outputs); the server itself bounds requests.
const maxResponseBytes = 256 << 20

// InProcess serves srv on an in-memory listener and returns client
// connections to it, so the gateway's calls pass the server's whole
// interceptor chain without a socket or a port. They are real gRPC
// (HTTP/2) connections: requests and responses are encoded as for any
// client. stop closes the connections and the listener; srv keeps serving
// its other listeners.
func InProcess(srv *grpc.Server) (conn grpc.ClientConnInterface, stop func(), err error) {
	lis := bufconn.Listen(inProcessBuffer)
	go func() { _ = srv.Serve(lis) }()
	pool := &connPool{}
	stop = func() {
		for _, c := range pool.conns {
			_ = c.Close()
		}
		_ = lis.Close()
	}
	for range inProcessConns {
		c, err := grpc.NewClient("passthrough:///oncejob-in-process",
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxResponseBytes)),
		)
		if err != nil {
			stop()
			return nil, nil, err
		}
		pool.conns = append(pool.conns, c)
	}
	return pool, stop, nil
}

// connPool spreads calls over its connections in turn.
type connPool struct {
	conns []*grpc.ClientConn
	next  atomic.Uint32
}

func (p *connPool) pick() *grpc.ClientConn {
	return p.conns[int(p.next.Add(1))%len(p.conns)]
}

// Invoke implements grpc.ClientConnInterface.
func (p *connPool) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return p.pick().Invoke(ctx, method, args, reply, opts...)
}

// NewStream implements grpc.ClientConnInterface.
func (p *connPool) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return p.pick().NewStream(ctx, desc, method, opts...)
}
