package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"log/slog"
	"time"

	"github.com/oncejob/oncejob/internal/certreload"
	"github.com/oncejob/oncejob/server"
)

// listenOpts are the flags of serve's listeners: TLS on gRPC and HTTP, and
// the gRPC connection limits (docs/operations.md, "TLS" and "Connections
// and streams").
type listenOpts struct {
	tlsCert, tlsKey, tlsClientCA string

	keepaliveTime, keepaliveTimeout, keepaliveMinTime time.Duration
	maxConnectionIdle, maxConnectionAge, ageGrace     time.Duration
	maxConcurrentStreams                              uint
}

func listenFlags(fs *flag.FlagSet) *listenOpts {
	o := &listenOpts{}
	fs.StringVar(&o.tlsCert, "tls-cert", "", "PEM certificate chain of the gRPC and HTTP listeners; with --tls-key, serve TLS (the files are read again when they change: rotate them in place)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&o.tlsClientCA, "tls-client-ca", "", "PEM CA bundle: require a client certificate it signed on gRPC and HTTP (mutual TLS); re-read when it changes")
	fs.DurationVar(&o.keepaliveTime, "grpc-keepalive-time", server.DefaultKeepaliveTime, "ping a gRPC connection quiet for this long")
	fs.DurationVar(&o.keepaliveTimeout, "grpc-keepalive-timeout", server.DefaultKeepaliveTimeout, "close a gRPC connection whose ping is unanswered this long (ends its watches)")
	fs.DurationVar(&o.keepaliveMinTime, "grpc-keepalive-min-time", server.DefaultKeepaliveMinTime, "shortest interval between a client's pings; a client pinging more often gets GOAWAY too_many_pings")
	fs.DurationVar(&o.maxConnectionIdle, "grpc-max-connection-idle", server.DefaultMaxConnectionIdle, "close a gRPC connection with no call or stream open for this long (0: never)")
	fs.DurationVar(&o.maxConnectionAge, "grpc-max-connection-age", 0, "send GOAWAY to a gRPC connection this old, so clients reconnect and spread over replicas behind one address (0: never)")
	fs.DurationVar(&o.ageGrace, "grpc-max-connection-age-grace", 0, "after --grpc-max-connection-age, cut the calls and streams still open this much later (0: let them end; the SDKs resume cut watches)")
	fs.UintVar(&o.maxConcurrentStreams, "grpc-max-concurrent-streams", server.DefaultMaxConcurrentStreams, "most calls and streams open at once on one gRPC connection; clients queue the rest")
	return o
}

// listeners is what the flags make: the gRPC transport, and the HTTP
// face's TLS configuration (nil: plaintext).
type listeners struct {
	transport server.Transport
	httpTLS   *tls.Config
}

func (o *listenOpts) listeners(logger *slog.Logger) (*listeners, error) {
	if o.keepaliveTime <= 0 || o.keepaliveTimeout <= 0 || o.keepaliveMinTime <= 0 {
		return nil, errors.New("--grpc-keepalive-time, --grpc-keepalive-timeout and --grpc-keepalive-min-time must be positive")
	}
	if o.maxConcurrentStreams < 1 || o.maxConcurrentStreams > 1<<31 {
		return nil, errors.New("--grpc-max-concurrent-streams must be between 1 and 2^31")
	}
	l := &listeners{transport: server.Transport{
		KeepaliveTime:         o.keepaliveTime,
		KeepaliveTimeout:      o.keepaliveTimeout,
		KeepaliveMinTime:      o.keepaliveMinTime,
		MaxConnectionIdle:     o.maxConnectionIdle,
		MaxConnectionAge:      o.maxConnectionAge,
		MaxConnectionAgeGrace: o.ageGrace,
		MaxConcurrentStreams:  uint32(o.maxConcurrentStreams),
	}}
	if l.transport.MaxConnectionIdle == 0 {
		l.transport.MaxConnectionIdle = -1 // server.Transport: zero is the default, negative never
	}
	switch {
	case o.tlsCert == "" && o.tlsKey == "" && o.tlsClientCA == "":
		return l, nil
	case o.tlsCert == "" || o.tlsKey == "":
		return nil, errors.New("TLS needs both --tls-cert and --tls-key (--tls-client-ca adds client certificates to them)")
	}
	r, err := certreload.New(certreload.Files{Cert: o.tlsCert, Key: o.tlsKey, ClientCA: o.tlsClientCA}, logger)
	if err != nil {
		return nil, err
	}
	l.transport.TLS = r.ServerConfig("h2")
	l.httpTLS = r.ServerConfig("h2", "http/1.1")
	return l, nil
}

// tls reports whether the listeners serve TLS.
func (l *listeners) tls() bool { return l.httpTLS != nil }
