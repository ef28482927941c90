package gateway

import (
	"context"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// inProcessBuffer is the in-memory pipe's buffer per direction, allocated
// when the connection is made. HTTP/2 frames are at most 16 KiB and a
// writer that fills it waits for the reader, so it need not hold a whole
// message.
const inProcessBuffer = 256 << 10

// maxResponseBytes bounds one response read from the server (a page of
// jobs with their outputs); the server itself bounds requests.
const maxResponseBytes = 256 << 20

// InProcess serves srv on an in-memory listener and returns a client
// connection to it, for the unary routes: their calls pass the server's
// whole interceptor chain without a socket or a port. It is a real gRPC
// (HTTP/2) connection: requests and responses are encoded as for any
// client. stop closes the connection and the listener; srv keeps serving
// its other listeners.
func InProcess(srv *grpc.Server) (conn *grpc.ClientConn, stop func(), err error) {
	lis := bufconn.Listen(inProcessBuffer)
	go func() { _ = srv.Serve(lis) }()
	conn, err = grpc.NewClient("passthrough:///oncejob-in-process",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxResponseBytes)),
	)
	if err != nil {
		_ = lis.Close()
		return nil, nil, err
	}
	conn.Connect() // now, rather than on the first call: a server's fixed cost
	return conn, func() { _ = conn.Close(); _ = lis.Close() }, nil
}
