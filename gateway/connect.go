package gateway

import (
	"net/http"
	"sort"

	"connectrpc.com/vanguard"
	"connectrpc.com/vanguard/vanguardgrpc"
	"google.golang.org/grpc"
)

// ConnectHandler serves every service of a gRPC server over the Connect
// protocol and gRPC-web (the protocols of browsers and Connect-ES clients),
// beside the JSON routes. Each call is translated to gRPC by
// connectrpc.com/vanguard and handed to the grpc.Server itself
// (grpc.Server.ServeHTTP), so it runs the server's whole interceptor
// chain — API keys, roles, limits, validation, the idempotency-key
// metadata, tracing — and its errors carry the same google.rpc details.
// HTTP headers reach the server as metadata, as a gRPC client's would; the
// response's metadata (idempotent-replayed) comes back as headers.
type ConnectHandler struct {
	transcoder *vanguard.Transcoder
	// Paths are the patterns to mount it under: "/<service>/" for each
	// service of the server (oncejob.v1.JobService, grpc.health.v1.Health, ...).
	Paths []string
}

// Connect returns the Connect and gRPC-web face of srv. maxMessageBytes
// bounds a message the translation buffers (the gRPC server's own receive
// limit, server.MaxMessageBytes, bounds what it decodes).
func Connect(srv *grpc.Server, maxMessageBytes int) (*ConnectHandler, error) {
	t, err := vanguardgrpc.NewTranscoder(srv, vanguard.WithDefaultServiceOptions(
		vanguard.WithMaxMessageBufferBytes(uint32(min(maxMessageBytes, 1<<31))), //nolint:gosec // bounded above
	))
	if err != nil {
		return nil, err
	}
	h := &ConnectHandler{transcoder: t}
	for name := range srv.GetServiceInfo() {
		h.Paths = append(h.Paths, "/"+name+"/")
	}
	sort.Strings(h.Paths)
	return h, nil
}

// ServeHTTP serves one Connect, gRPC-web or gRPC call.
func (h *ConnectHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.transcoder.ServeHTTP(w, r)
}
