package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/oncejob/oncejob/gateway"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/server/readiness"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/web"
)

// httpOpts is serve's HTTP face: the HTTP/JSON API, the Connect and
// gRPC-web protocols, and the console.
type httpOpts struct {
	addr        string
	corsOrigins string
	tls         *tls.Config  // nil: plaintext (listenFlags sets it)
	timeouts    httpTimeouts // listenFlags sets them
}

func httpFlags(fs *flag.FlagSet) *httpOpts {
	o := &httpOpts{}
	fs.StringVar(&o.addr, "http-addr", "127.0.0.1:7071", "address of the HTTP/JSON API, the Connect and gRPC-web protocols and the web console; empty: none")
	fs.StringVar(&o.corsOrigins, "cors-allowed-origins", "", "comma-separated origins (https://app.example.com) whose pages may call the API from a browser; empty: none, a request from another origin is refused (docs/operations.md)")
	return o
}

func (o *httpOpts) validate() error {
	_, err := gateway.NewCORS(strings.Split(o.corsOrigins, ","))
	return err
}

// httpFace is a running HTTP server.
type httpFace struct {
	addr    string // where it listens; empty when off
	srv     *http.Server
	stopRPC func()
}

// start serves the gateway (on srv, in process), the Connect and gRPC-web
// protocols (every service of srv, at /<service>/<method>), the console
// and GET /metrics on o.addr, unless it is empty. The API's routes (JSON,
// Connect, gRPC-web) answer pages of other origins only as
// --cors-allowed-origins allows. A dev-mode server (no API keys) answers only
// requests addressed to an IP or localhost.
func (o *httpOpts) start(ctx context.Context, srv *server.Server, probe *readiness.Probe, metrics http.Handler, maxDocumentBytes int, devMode bool, logger *slog.Logger) (*httpFace, error) {
	if o.addr == "" {
		return &httpFace{}, nil
	}
	lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.addr)
	if err != nil {
		return nil, err
	}
	conn, stopRPC, err := gateway.InProcess(srv.GRPC)
	if err != nil {
		_ = lis.Close()
		return nil, err
	}
	gw, err := gateway.New(ctx, gateway.Config{
		Conn: conn, Streams: srv.Local, MaxBodyBytes: gateway.MaxBodyBytesFor(maxDocumentBytes), MaxMessageBytes: server.MaxMessageBytes(maxDocumentBytes),
		Authenticate: authenticateHeader(srv.Auth), Memory: srv.Memory, WriteTimeout: o.timeouts.write, Logger: logger,
	})
	if err != nil {
		stopRPC()
		_ = lis.Close()
		return nil, err
	}
	connect, err := gateway.Connect(srv.GRPC, server.MaxMessageBytes(maxDocumentBytes))
	if err != nil {
		stopRPC()
		_ = lis.Close()
		return nil, err
	}
	connect.Guard(authenticateHeader(srv.Auth), srv.Memory)
	cors, err := gateway.NewCORS(strings.Split(o.corsOrigins, ","))
	if err != nil {
		stopRPC()
		_ = lis.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", cors.Wrap(gw))
	for _, path := range connect.Paths {
		mux.Handle(path, cors.Wrap(connect))
	}
	mux.Handle("/healthz", gw)
	probe.Mount(mux) // GET /readyz follows the store, GET /livez the process
	mux.Handle("GET /metrics", metrics)
	mux.Handle("/", web.Handler())
	var handler http.Handler = mux
	if devMode {
		handler = gateway.LocalHostsOnly(mux)
	}
	f := &httpFace{
		addr:    lis.Addr().String(),
		stopRPC: stopRPC,
		// ReadTimeout bounds a request's headers and body; once the body is
		// in, readDeadlineLifted lifts it, so responses (watches, streams)
		// last as long as they need. No write timeout here: watches stream
		// for as long as clients stay; the gateway bounds every other
		// response's writing (--http-write-timeout).
		srv: &http.Server{
			Handler:           readDeadlineLifted(handler),
			ReadHeaderTimeout: o.timeouts.readHeader,
			ReadTimeout:       o.timeouts.read,
			IdleTimeout:       o.timeouts.idle,
		},
	}
	serve := f.srv.Serve
	if o.tls != nil {
		f.srv.TLSConfig = o.tls
		serve = func(l net.Listener) error { return f.srv.ServeTLS(l, "", "") }
	}
	go func() {
		if err := serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server stopped", "error", err)
		}
	}()
	return f, nil
}

// stop waits up to timeout for requests in flight (watches end when the
// hub shuts down, which comes first), then closes what is left.
func (f *httpFace) stop(timeout time.Duration) {
	if f.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := f.srv.Shutdown(ctx); err != nil {
		_ = f.srv.Close()
	}
	f.stopRPC()
}

// authenticateHeader checks an HTTP Authorization header as the gRPC
// server would, so the gateway refuses a caller before reading its body.
func authenticateHeader(a *tenant.Authenticator) func(ctx context.Context, authorization string) error {
	authFunc := a.AuthFunc()
	return func(ctx context.Context, authorization string) error {
		md := metadata.MD{}
		if authorization != "" {
			md.Set("authorization", authorization)
		}
		_, err := authFunc(metadata.NewIncomingContext(ctx, md))
		return err
	}
}

// readDeadlineLifted lifts a request's read deadline (the server's
// ReadTimeout, which bounds its headers and body) once its body has been
// read whole, or at once when it has none: Go's HTTP server otherwise
// cancels a request whose connection passes the deadline, which would end
// every watch and long response at ReadTimeout. A body that trickles, or
// never ends, stays bounded by it.
func readDeadlineLifted(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			_ = rc.SetReadDeadline(time.Time{})
		} else {
			// On a copy: the server still sees its own body, to discard
			// what a handler left unread, or close the connection on a
			// large rest rather than wait for it.
			r = r.WithContext(r.Context())
			r.Body = &liftAtEOF{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		}
		h.ServeHTTP(w, r)
	})
}

// liftAtEOF calls lift once, when its body has been read to its end.
type liftAtEOF struct {
	io.ReadCloser
	lift func()
	done bool
}

func (b *liftAtEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.done {
		b.done = true
		b.lift()
	}
	return n, err
}
