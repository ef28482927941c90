package server

import (
	"crypto/tls"
	"errors"
	"net"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// Transport are the limits of the server's connections and its TLS. The
// defaults are documented in docs/operations.md ("Connections and
// streams"); `serve` sets them from its flags.
//
// Watch streams stay open for long and may carry nothing for minutes, so
// the server pings a connection that has been quiet for KeepaliveTime and
// drops a peer that does not answer within KeepaliveTimeout, which ends its
// streams: a watch whose client vanished is gone within KeepaliveTime +
// KeepaliveTimeout. Clients may ping it as often as every
// KeepaliveMinTime, with or without streams, to keep NATs and load
// balancers from dropping quiet watches; a client that pings more often is
// sent GOAWAY (ENHANCE_YOUR_CALM, "too_many_pings") and disconnected.
type Transport struct {
	// KeepaliveTime: the server pings a connection quiet for this long.
	// Default DefaultKeepaliveTime (30s).
	KeepaliveTime time.Duration
	// KeepaliveTimeout: a ping unanswered this long closes the connection.
	// Default DefaultKeepaliveTimeout (10s).
	KeepaliveTimeout time.Duration
	// KeepaliveMinTime is the shortest interval between a client's pings
	// the server tolerates. Default DefaultKeepaliveMinTime (10s).
	KeepaliveMinTime time.Duration
	// MaxConnectionIdle closes (GOAWAY) a connection that has had no
	// stream open for this long. Default DefaultMaxConnectionIdle (15m);
	// negative: never.
	MaxConnectionIdle time.Duration
	// MaxConnectionAge, when positive, sends GOAWAY to a connection this
	// old (with a jitter of 10%), so clients reconnect and spread over the
	// replicas a load balancer put behind one address; its calls and
	// streams then have MaxConnectionAgeGrace to end (0: as long as they
	// take) before they are cut, and the SDKs resume cut watches. Default
	// 0: never.
	MaxConnectionAge      time.Duration
	MaxConnectionAgeGrace time.Duration
	// MaxConcurrentStreams bounds the calls (unary and streams) open at
	// once on one connection; the client queues those over it. Default
	// DefaultMaxConcurrentStreams (1000).
	MaxConcurrentStreams uint32
	// RequestReadTimeout bounds how long a call may take to send its
	// request message, from its headers on; past it the call ends
	// (CANCELLED) and its stream and bytes are freed. Default
	// DefaultRequestReadTimeout (30s); negative: none.
	RequestReadTimeout time.Duration
	// HandshakeTimeout bounds a new connection's handshake (TLS and the
	// HTTP/2 preface). Default DefaultHandshakeTimeout (10s).
	HandshakeTimeout time.Duration
	// TLS, when set, is the server's TLS configuration (see
	// internal/certreload for certificates that rotate); nil: plaintext.
	// Connections made in process (the HTTP gateway's) stay plaintext.
	TLS *tls.Config
}

// Transport defaults (docs/operations.md, "Connections and streams").
const (
	DefaultKeepaliveTime        = 30 * time.Second
	DefaultKeepaliveTimeout     = 10 * time.Second
	DefaultKeepaliveMinTime     = 10 * time.Second
	DefaultMaxConnectionIdle    = 15 * time.Minute
	DefaultMaxConcurrentStreams = 1000
	DefaultRequestReadTimeout   = 30 * time.Second
	DefaultHandshakeTimeout     = 10 * time.Second
)

// WithDefaults returns t with zero fields set to their defaults.
func (t Transport) WithDefaults() Transport {
	if t.KeepaliveTime == 0 {
		t.KeepaliveTime = DefaultKeepaliveTime
	}
	if t.KeepaliveTimeout == 0 {
		t.KeepaliveTimeout = DefaultKeepaliveTimeout
	}
	if t.KeepaliveMinTime == 0 {
		t.KeepaliveMinTime = DefaultKeepaliveMinTime
	}
	if t.MaxConnectionIdle == 0 {
		t.MaxConnectionIdle = DefaultMaxConnectionIdle
	}
	if t.MaxConcurrentStreams == 0 {
		t.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if t.RequestReadTimeout == 0 {
		t.RequestReadTimeout = DefaultRequestReadTimeout
	}
	if t.HandshakeTimeout <= 0 {
		t.HandshakeTimeout = DefaultHandshakeTimeout
	}
	return t
}

func (t Transport) validate() error {
	if t.KeepaliveTime < 0 || t.KeepaliveTimeout < 0 || t.KeepaliveMinTime < 0 {
		return errors.New("server: Transport keepalive durations must not be negative")
	}
	return nil
}

func (t Transport) keepaliveParams() keepalive.ServerParameters {
	p := keepalive.ServerParameters{Time: t.KeepaliveTime, Timeout: t.KeepaliveTimeout}
	if t.MaxConnectionIdle > 0 {
		p.MaxConnectionIdle = t.MaxConnectionIdle
	}
	if t.MaxConnectionAge > 0 {
		p.MaxConnectionAge = t.MaxConnectionAge
		if t.MaxConnectionAgeGrace > 0 {
			p.MaxConnectionAgeGrace = t.MaxConnectionAgeGrace
		}
	}
	return p
}

func (t Transport) enforcementPolicy() keepalive.EnforcementPolicy {
	return keepalive.EnforcementPolicy{MinTime: t.KeepaliveMinTime, PermitWithoutStream: true}
}

// creds is TLS when t.TLS is set, else nil (plaintext).
func (t Transport) creds() credentials.TransportCredentials {
	if t.TLS == nil {
		return nil
	}
	return inProcessPlaintext{TransportCredentials: credentials.NewTLS(t.TLS)}
}

// inProcessPlaintext is TLS for connections from the network and
// plaintext for those made in process over a bufconn listener (the HTTP
// gateway's, gateway.InProcess): those never leave the process, and the
// gateway has no client certificate to present.
type inProcessPlaintext struct {
	credentials.TransportCredentials
}

// ServerHandshake implements credentials.TransportCredentials.
func (c inProcessPlaintext) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if conn.LocalAddr().Network() == "bufconn" {
		return insecure.NewCredentials().ServerHandshake(conn)
	}
	return c.TransportCredentials.ServerHandshake(conn)
}

// Clone implements credentials.TransportCredentials.
func (c inProcessPlaintext) Clone() credentials.TransportCredentials {
	return inProcessPlaintext{TransportCredentials: c.TransportCredentials.Clone()}
}
