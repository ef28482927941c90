package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"log/slog"
	"time"

	"github.com/oncejob/oncejob/gateway"
	"github.com/oncejob/oncejob/internal/certreload"
	"github.com/oncejob/oncejob/server"
)

// tlsOpts are --tls-cert, --tls-key and --tls-client-ca: TLS (and mutual
// TLS) on every listener of the process, certificates re-read when their
// files change (docs/operations.md, "TLS and certificate rotation"). A
// command with an HTTP listener adds them with tlsFlags and serves
// tlsOpts.reloader's ServerConfig("h2", "http/1.1").
type tlsOpts struct {
	cert, key, clientCA string
}

func tlsFlags(fs *flag.FlagSet) *tlsOpts {
	o := &tlsOpts{}
	fs.StringVar(&o.cert, "tls-cert", "", "PEM certificate chain of the listeners (gRPC and HTTP); with --tls-key, serve TLS (the files are read again when they change: rotate them in place)")
	fs.StringVar(&o.key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&o.clientCA, "tls-client-ca", "", "PEM CA bundle: require a client certificate it signed (mutual TLS); re-read when it changes")
	return o
}

// reloader returns the certificates of the flags, nil when TLS is off.
func (o *tlsOpts) reloader(logger *slog.Logger) (*certreload.Reloader, error) {
	switch {
	case o.cert == "" && o.key == "" && o.clientCA == "":
		return nil, nil
	case o.cert == "" || o.key == "":
		return nil, errors.New("TLS needs both --tls-cert and --tls-key (--tls-client-ca adds client certificates to them)")
	}
	return certreload.New(certreload.Files{Cert: o.cert, Key: o.key, ClientCA: o.clientCA}, logger)
}

// listenOpts are the flags of serve's listeners: TLS on gRPC and HTTP, and
// the gRPC connection limits (docs/operations.md, "Connections and
// streams").
type listenOpts struct {
	tls *tlsOpts

	keepaliveTime, keepaliveTimeout, keepaliveMinTime time.Duration
	maxConnectionIdle, maxConnectionAge, ageGrace     time.Duration
	maxConcurrentStreams                              uint
	requestReadTimeout, handshakeTimeout              time.Duration
	httpReadHeaderTimeout, httpIdleTimeout            time.Duration
	httpWriteTimeout                                  time.Duration
}

func listenFlags(fs *flag.FlagSet) *listenOpts {
	o := &listenOpts{tls: tlsFlags(fs)}
	fs.DurationVar(&o.keepaliveTime, "grpc-keepalive-time", server.DefaultKeepaliveTime, "ping a gRPC connection quiet for this long")
	fs.DurationVar(&o.keepaliveTimeout, "grpc-keepalive-timeout", server.DefaultKeepaliveTimeout, "close a gRPC connection whose ping is unanswered this long (ends its watches)")
	fs.DurationVar(&o.keepaliveMinTime, "grpc-keepalive-min-time", server.DefaultKeepaliveMinTime, "shortest interval between a client's pings; a client pinging more often gets GOAWAY too_many_pings")
	fs.DurationVar(&o.maxConnectionIdle, "grpc-max-connection-idle", server.DefaultMaxConnectionIdle, "close a gRPC connection with no call or stream open for this long (0: never)")
	fs.DurationVar(&o.maxConnectionAge, "grpc-max-connection-age", 0, "send GOAWAY to a gRPC connection this old, so clients reconnect and spread over replicas behind one address (0: never)")
	fs.DurationVar(&o.ageGrace, "grpc-max-connection-age-grace", 0, "after --grpc-max-connection-age, cut the calls and streams still open this much later (0: let them end; the SDKs resume cut watches)")
	fs.UintVar(&o.maxConcurrentStreams, "grpc-max-concurrent-streams", server.DefaultMaxConcurrentStreams, "most calls and streams open at once on one gRPC connection; clients queue the rest")
	fs.DurationVar(&o.requestReadTimeout, "request-read-timeout", server.DefaultRequestReadTimeout, "longest a call may take to send its request, headers included (gRPC message, HTTP body); then it is cut and its bytes freed. Responses are not bounded by it (see --http-write-timeout)")
	fs.DurationVar(&o.handshakeTimeout, "grpc-handshake-timeout", server.DefaultHandshakeTimeout, "longest a new gRPC connection may take to finish its TLS and HTTP/2 handshake")
	fs.DurationVar(&o.httpReadHeaderTimeout, "http-read-header-timeout", 10*time.Second, "longest an HTTP request may take to send its headers")
	fs.DurationVar(&o.httpIdleTimeout, "http-idle-timeout", 2*time.Minute, "close an HTTP keep-alive connection idle this long")
	fs.DurationVar(&o.httpWriteTimeout, "http-write-timeout", gateway.DefaultWriteTimeout, "longest an HTTP/JSON response, every one but a watch's, may take to be written; then its connection is closed and its bytes, drawn from the memory budget, freed")
	return o
}

// listeners is what the flags make: the gRPC transport, and the HTTP
// face's TLS configuration (nil: plaintext).
type listeners struct {
	transport server.Transport
	httpTLS   *tls.Config
	http      httpTimeouts
}

// httpTimeouts are the HTTP face's timeouts (docs/operations.md, "Request
// bodies and timeouts").
type httpTimeouts struct {
	readHeader, read, idle, write time.Duration
}

// validate checks the flags once, before anything starts.
func (o *listenOpts) validate() error {
	if o.keepaliveTime <= 0 || o.keepaliveTimeout <= 0 || o.keepaliveMinTime <= 0 {
		return errors.New("--grpc-keepalive-time, --grpc-keepalive-timeout and --grpc-keepalive-min-time must be positive")
	}
	if o.maxConcurrentStreams < 1 || o.maxConcurrentStreams > 1<<31 {
		return errors.New("--grpc-max-concurrent-streams must be between 1 and 2^31")
	}
	if o.requestReadTimeout <= 0 || o.handshakeTimeout <= 0 || o.httpReadHeaderTimeout <= 0 || o.httpIdleTimeout <= 0 || o.httpWriteTimeout <= 0 {
		return errors.New("--request-read-timeout, --grpc-handshake-timeout, --http-read-header-timeout, --http-idle-timeout and --http-write-timeout must be positive")
	}
	if o.httpReadHeaderTimeout > o.requestReadTimeout {
		return errors.New("--http-read-header-timeout must not be longer than --request-read-timeout (which includes the headers)")
	}
	return nil
}

// listeners makes the listeners' settings from valid flags (validate),
// loading the TLS certificates.
func (o *listenOpts) listeners(logger *slog.Logger) (*listeners, error) {
	l := &listeners{transport: server.Transport{
		KeepaliveTime:         o.keepaliveTime,
		KeepaliveTimeout:      o.keepaliveTimeout,
		KeepaliveMinTime:      o.keepaliveMinTime,
		MaxConnectionIdle:     o.maxConnectionIdle,
		MaxConnectionAge:      o.maxConnectionAge,
		MaxConnectionAgeGrace: o.ageGrace,
		MaxConcurrentStreams:  uint32(o.maxConcurrentStreams),
		RequestReadTimeout:    o.requestReadTimeout,
		HandshakeTimeout:      o.handshakeTimeout,
	}, http: httpTimeouts{readHeader: o.httpReadHeaderTimeout, read: o.requestReadTimeout, idle: o.httpIdleTimeout, write: o.httpWriteTimeout}}
	if l.transport.MaxConnectionIdle == 0 {
		l.transport.MaxConnectionIdle = -1 // server.Transport: zero is the default, negative never
	}
	r, err := o.tls.reloader(logger)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return l, nil
	}
	l.transport.TLS = r.ServerConfig("h2")
	l.httpTLS = r.ServerConfig("h2", "http/1.1")
	return l, nil
}

// tls reports whether the listeners serve TLS.
func (l *listeners) tls() bool { return l.httpTLS != nil }
