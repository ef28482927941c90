package gateway

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"connectrpc.com/vanguard"
	"connectrpc.com/vanguard/vanguardgrpc"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/server/membudget"
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
	transcoder   *vanguard.Transcoder
	authenticate func(ctx context.Context, authorization string) error
	memory       *membudget.Budget
	// maxBodyBytes bounds a request body: one message and its framing
	// (there are no client streams), with room for a compression that
	// grows what it cannot shrink.
	maxBodyBytes int64
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
	h := &ConnectHandler{transcoder: t, maxBodyBytes: int64(maxMessageBytes) + 1<<20}
	for name := range srv.GetServiceInfo() {
		h.Paths = append(h.Paths, "/"+name+"/")
	}
	sort.Strings(h.Paths)
	return h, nil
}

// Guard checks a call's Authorization header with authenticate before its
// body is read, and draws the body from memory while the call runs, as
// the JSON routes do (Config.Authenticate, Config.Memory). The
// translation reads a body whole before the gRPC server sees the call.
func (h *ConnectHandler) Guard(authenticate func(ctx context.Context, authorization string) error, memory *membudget.Budget) {
	h.authenticate, h.memory = authenticate, memory
}

// ServeHTTP serves one Connect, gRPC-web or gRPC call.
func (h *ConnectHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && !strings.HasPrefix(r.URL.Path, "/grpc.") {
		if h.authenticate != nil {
			if err := h.authenticate(r.Context(), r.Header.Get("Authorization")); err != nil {
				writeCallError(w, r, status.Convert(err))
				return
			}
		}
		if r.ContentLength > h.maxBodyBytes {
			// Refused by its announced length before any of it is drawn
			// from the budget, as the JSON routes do: drawn, a length no
			// call can use would take the budget from every other call
			// without a byte sent.
			writeCallError(w, r, status.Newf(codes.ResourceExhausted, "the request body of %d bytes is over the limit of %d bytes (--max-document-bytes plus 2 MiB)", r.ContentLength, h.maxBodyBytes))
			return
		}
		hold := h.memory.Hold("a request body")
		defer hold.Release()
		if r.ContentLength > 0 {
			if err := hold.Grow(r.ContentLength); err != nil {
				writeCallError(w, r, status.Convert(err))
				return
			}
		} else if enveloped(r.Header.Get("Content-Type")) {
			r.Body = &envelopeHeldBody{ReadCloser: r.Body, hold: hold}
		} else {
			r.Body = heldBody{ReadCloser: r.Body, hold: hold}
		}
	}
	h.transcoder.ServeHTTP(w, r)
}

// enveloped reports whether a call's body is a stream of length-prefixed
// messages (gRPC, gRPC-web, Connect's streaming content types).
func enveloped(contentType string) bool {
	return strings.HasPrefix(contentType, "application/grpc") || strings.HasPrefix(contentType, "application/connect+")
}

// envelopeHeldBody draws each message of an enveloped body of unknown
// length from the budget when its 5-byte prefix (a flags byte, a 4-byte
// big-endian length) has been read: the translation and the gRPC server
// size a message's buffer by that length before its bytes arrive, so a
// prefix announcing 10 MB and a body that then stalls would otherwise hold
// 10 MB counted as 5 bytes. A body of known length is drawn whole by its
// Content-Length instead, as the translation buffers it so.
type envelopeHeldBody struct {
	io.ReadCloser
	hold   *membudget.Hold
	prefix [5]byte
	got    int   // bytes of the current prefix read
	left   int64 // bytes of the current message still to come
}

func (b *envelopeHeldBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	for i := 0; i < n; {
		if b.left > 0 {
			k := min(b.left, int64(n-i))
			b.left -= k
			i += int(k)
			continue
		}
		b.prefix[b.got] = p[i]
		b.got++
		i++
		if b.got == len(b.prefix) {
			b.got, b.left = 0, int64(binary.BigEndian.Uint32(b.prefix[1:]))
			if gerr := b.hold.Grow(int64(len(b.prefix)) + b.left); gerr != nil {
				return 0, overBudget{gerr}
			}
		}
	}
	return n, err
}

// writeCallError answers a call refused before the translation: in gRPC
// and gRPC-web, grpc-status and grpc-message headers (HTTP 200, as those
// protocols answer errors); in Connect, the HTTP status of the code and
// its JSON error.
func writeCallError(w http.ResponseWriter, r *http.Request, st *status.Status) {
	if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/grpc") {
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Grpc-Status", strconv.Itoa(int(st.Code())))
		w.Header().Set("Grpc-Message", url.PathEscape(st.Message()))
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(runtime.HTTPStatusFromCode(st.Code()))
	_ = json.NewEncoder(w).Encode(map[string]string{"code": strings.ToLower(codeName(st.Code())), "message": st.Message()})
}
