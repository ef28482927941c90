// Package faultproxy is a gRPC proxy on loopback for tests: it forwards
// every call to a backend as raw bytes, records each call's arrival (method,
// idempotency key, time), and on request loses what a real network loses —
// a response after the backend committed it, or a stream in the middle.
// Both faults close the client's connection, so the client sees what it
// would see when a connection breaks: UNAVAILABLE, outcome unknown.
//
// Tests in Go use the methods; tests in other languages use the HTTP
// control API (Proxy.ControlHandler).
package faultproxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Faults says what to lose next. Each count is used up as faults happen.
type Faults struct {
	// DropResponses: the next this-many calls of DropMethod (a full method
	// name, e.g. "/oncejob.v1.JobService/SubmitJob") reach the backend and
	// are answered, then the client's connection is closed instead of the
	// answer reaching it.
	DropMethod    string `json:"drop_method"`
	DropResponses int    `json:"drop_responses"`
	// CutStreams: the next this-many streams of CutMethod get CutAfter
	// messages through, then the client's connection is closed.
	CutMethod  string `json:"cut_method"`
	CutStreams int    `json:"cut_streams"`
	CutAfter   int    `json:"cut_after"`
}

// Call is one call that reached the proxy.
type Call struct {
	Method string    `json:"method"`
	Key    string    `json:"key"` // the idempotency-key metadata, if any
	At     time.Time `json:"at"`
	// Fault is "dropped" (the backend answered, the client did not get
	// it), "cut" (a stream cut after CutAfter messages) or "".
	Fault string `json:"fault"`
	// UnixNano is At for clients that do not parse RFC 3339.
	UnixNano int64 `json:"unix_nano"`
}

// Proxy is a running fault proxy.
type Proxy struct {
	lis     *connListener
	srv     *grpc.Server
	backend *grpc.ClientConn

	mu     sync.Mutex
	faults Faults
	calls  []Call
}

// Start serves a proxy to backend on a loopback port.
func Start(backend string) (*Proxy, error) {
	lis, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(backend, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		_ = lis.Close()
		return nil, err
	}
	p := &Proxy{lis: &connListener{Listener: lis, conns: map[string]net.Conn{}}, backend: conn}
	p.srv = grpc.NewServer(grpc.UnknownServiceHandler(p.forward), grpc.ForceServerCodec(rawCodec{}))
	go func() { _ = p.srv.Serve(p.lis) }()
	return p, nil
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return p.lis.Addr().String() }

// Close stops the proxy.
func (p *Proxy) Close() {
	p.srv.Stop()
	_ = p.backend.Close()
}

// SetFaults replaces the pending faults.
func (p *Proxy) SetFaults(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
}

// Calls returns the calls recorded so far, in arrival order.
func (p *Proxy) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Call(nil), p.calls...)
}

// Reset forgets the recorded calls and the pending faults.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls, p.faults = nil, Faults{}
}

// ControlHandler serves the proxy's control API for tests in other
// languages: GET /calls (JSON array of Call), POST /faults (a JSON Faults),
// POST /reset.
func (p *Proxy) ControlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /calls", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.Calls())
	})
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		var f Faults
		if err := json.NewDecoder(r.Body).Decode(&f); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		p.SetFaults(f)
	})
	mux.HandleFunc("POST /reset", func(http.ResponseWriter, *http.Request) { p.Reset() })
	return mux
}

// record notes a call's arrival and takes the faults that apply to it:
// whether to drop its response, and after how many messages to cut it (0:
// never).
func (p *Proxy) record(method, key string) (index int, drop bool, cutAfter int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.calls = append(p.calls, Call{Method: method, Key: key, At: now, UnixNano: now.UnixNano()})
	f := &p.faults
	if method == f.DropMethod && f.DropResponses > 0 {
		f.DropResponses--
		drop = true
	}
	if method == f.CutMethod && f.CutStreams > 0 && f.CutAfter > 0 {
		f.CutStreams--
		cutAfter = f.CutAfter
	}
	return len(p.calls) - 1, drop, cutAfter
}

func (p *Proxy) markFault(index int, fault string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[index].Fault = fault
}

// forward relays one call, of any kind, to the backend.
func (p *Proxy) forward(_ any, ss grpc.ServerStream) error {
	ctx := ss.Context()
	method, _ := grpc.MethodFromServerStream(ss)
	in, _ := metadata.FromIncomingContext(ctx)
	index, drop, cutAfter := p.record(method, first(in.Get("idempotency-key")))

	out := metadata.MD{}
	for k, v := range in {
		if !strings.HasPrefix(k, ":") && k != "content-type" && k != "user-agent" && k != "te" && !strings.HasPrefix(k, "grpc-") {
			out[k] = v
		}
	}
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ctx, out))
	defer cancel()
	cs, err := p.backend.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	go func() { // client to backend
		for {
			var f frame
			if err := ss.RecvMsg(&f); err != nil {
				_ = cs.CloseSend()
				return
			}
			if err := cs.SendMsg(&f); err != nil {
				return
			}
		}
	}()
	if md, err := cs.Header(); err == nil {
		_ = ss.SendHeader(md)
	}
	sent := 0
	for {
		var f frame
		err := cs.RecvMsg(&f)
		if errors.Is(err, io.EOF) {
			ss.SetTrailer(cs.Trailer())
			return nil
		}
		if err != nil {
			return err // the backend's status, passed on
		}
		if drop {
			p.markFault(index, "dropped")
			return p.breakConnection(ctx)
		}
		if err := ss.SendMsg(&f); err != nil {
			return err
		}
		sent++
		if cutAfter > 0 && sent == cutAfter {
			p.markFault(index, "cut")
			return p.breakConnection(ctx)
		}
	}
}

// breakConnection closes the client's TCP connection: everything in flight
// on it is lost, as when a network path dies.
func (p *Proxy) breakConnection(ctx context.Context) error {
	if pr, ok := peer.FromContext(ctx); ok {
		p.lis.close(pr.Addr.String())
	}
	return status.Error(codes.Unavailable, "faultproxy: connection broken")
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// connListener remembers accepted connections by remote address, so a
// handler can close its client's.
type connListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[string]net.Conn
}

func (l *connListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns[c.RemoteAddr().String()] = c
		l.mu.Unlock()
	}
	return c, err
}

func (l *connListener) close(remote string) {
	l.mu.Lock()
	c := l.conns[remote]
	delete(l.conns, remote)
	l.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// frame is one message as bytes.
type frame struct{ data []byte }

// rawCodec implements encoding.Codec by passing frames through unparsed.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.(*frame).data, nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	v.(*frame).data = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }
