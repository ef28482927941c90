package clientsdk

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// Client calls one oncejob deployment. It is safe for concurrent use.
type Client struct {
	conn    grpc.ClientConnInterface
	owned   *grpc.ClientConn // closed by Close when Dial made it
	svc     oncejobv1.JobServiceClient
	timeout time.Duration
	policy  RetryPolicy
}

// Option configures a Client.
type Option func(*config)

type config struct {
	tls       *tls.Config
	useTLS    bool
	apiKey    string
	userAgent string
	timeout   time.Duration
	policy    RetryPolicy
	dialOpts  []grpc.DialOption
}

// WithTLS connects over TLS with cfg; nil means the system's roots. See
// TLSConfig for a custom CA and a client certificate.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) { c.useTLS, c.tls = true, cfg }
}

// WithAPIKey sends `authorization: Bearer <key>` on every call. Use TLS
// with it anywhere but loopback: the key is a password.
func WithAPIKey(key string) Option { return func(c *config) { c.apiKey = key } }

// WithUserAgent prefixes the gRPC user agent.
func WithUserAgent(ua string) Option { return func(c *config) { c.userAgent = ua } }

// WithTimeout bounds each unary call (all its attempts and waits) whose
// context has no deadline; default 30s, 0 for none. Watches are not bounded
// by it.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithRetryPolicy sets the client's retry policy; zero fields take
// DefaultRetryPolicy's values.
func WithRetryPolicy(p RetryPolicy) Option { return func(c *config) { c.policy = p } }

// WithDialOptions adds grpc-go dial options (Dial only).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dialOpts = append(c.dialOpts, opts...) }
}

// TLSConfig returns a TLS configuration trusting the PEM certificates in
// caFile (empty: the system's roots) and presenting the client certificate
// in certFile and keyFile (both empty: none).
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("oncejob: CA file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("oncejob: CA file %s holds no PEM certificate", caFile)
		}
	}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("oncejob: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Dial returns a Client of the server at addr ("host:port"). A list of
// addresses separated by commas ("10.0.0.1:7070,10.0.0.2:7070") names
// replicas of one deployment: a call goes to one that answers, and a
// watch whose replica stops resumes on another. Any grpc-go target
// ("dns:///oncejob.internal:7070") works too.
func Dial(addr string, opts ...Option) (*Client, error) {
	cfg := newConfig(opts)
	dialOpts := []grpc.DialOption{
		// Watches are long and may be quiet: ping an idle connection so a
		// NAT or load balancer does not drop it (the server allows 10s+).
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		// Every call is a span of the caller's OpenTelemetry tracer provider,
		// its trace context sent along: the job a SubmitJob creates joins
		// the caller's trace. With no provider set (OpenTelemetry's no-op
		// default) nothing is recorded or sent.
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
	}
	if cfg.useTLS {
		tc := cfg.tls
		if tc == nil {
			tc = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		dialOpts = append(dialOpts, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	} else {
		dialOpts = append(dialOpts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if cfg.apiKey != "" {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(bearer{key: cfg.apiKey, secure: cfg.useTLS}))
	}
	ua := "oncejob-go"
	if cfg.userAgent != "" {
		ua = cfg.userAgent + " " + ua
	}
	dialOpts = append(dialOpts, grpc.WithUserAgent(ua))
	target := addr
	if strings.Contains(addr, ",") && !strings.Contains(addr, "://") {
		r := staticResolver(strings.Split(addr, ","))
		dialOpts = append(dialOpts, grpc.WithResolvers(r))
		target = r.Scheme() + ":///replicas"
	}
	conn, err := grpc.NewClient(target, append(dialOpts, cfg.dialOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("oncejob: dial %s: %w", addr, err)
	}
	c := newClient(conn, cfg)
	c.owned = conn
	return c, nil
}

// New returns a Client on an existing connection, which the caller keeps
// and closes. TLS, API key, user agent and dial options are the
// connection's business; WithTimeout and WithRetryPolicy apply.
func New(conn grpc.ClientConnInterface, opts ...Option) *Client {
	return newClient(conn, newConfig(opts))
}

func newConfig(opts []Option) *config {
	cfg := &config{timeout: 30 * time.Second}
	for _, o := range opts {
		o(cfg)
	}
	return cfg
}

func newClient(conn grpc.ClientConnInterface, cfg *config) *Client {
	return &Client{conn: conn, svc: oncejobv1.NewJobServiceClient(conn), timeout: cfg.timeout, policy: cfg.policy.withDefaults()}
}

// Close closes the connection Dial made; on a Client from New it does
// nothing.
func (c *Client) Close() error {
	if c.owned == nil {
		return nil
	}
	return c.owned.Close()
}

// Service returns the generated client on the same connection, for what
// the SDK does not wrap. Its calls are not retried.
func (c *Client) Service() oncejobv1.JobServiceClient { return c.svc }

// bearer implements credentials.PerRPCCredentials with a fixed API key.
type bearer struct {
	key    string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.key}, nil
}

// RequireTransportSecurity is false only so a key works on a plaintext
// loopback or in-cluster connection; WithTLS is the normal case.
func (b bearer) RequireTransportSecurity() bool { return b.secure }

var resolverSeq atomic.Int64

// staticResolver resolves to a fixed list of addresses, one scheme per
// Client so two Clients never share a resolver.
func staticResolver(addrs []string) *manual.Resolver {
	r := manual.NewBuilderWithScheme(fmt.Sprintf("oncejob-replicas-%d", resolverSeq.Add(1)))
	state := resolver.State{}
	for _, a := range addrs {
		if a = strings.TrimSpace(a); a != "" {
			state.Addresses = append(state.Addresses, resolver.Address{Addr: a})
		}
	}
	r.InitialState(state)
	return r
}

// callOptions are the per-call settings of one logical call.
type callOptions struct {
	key    string
	policy *RetryPolicy
}

// CallOption configures one call.
type CallOption func(*callOptions)

// WithIdempotencyKey sets the call's idempotency key (1-255 printable
// ASCII), sent on every attempt of the call. Without it Submit derives one
// from the request (SubmitKey) and the operator calls make one per call.
func WithIdempotencyKey(key string) CallOption { return func(o *callOptions) { o.key = key } }

// WithCallRetryPolicy overrides the client's retry policy for one call.
func WithCallRetryPolicy(p RetryPolicy) CallOption {
	return func(o *callOptions) { p = p.withDefaults(); o.policy = &p }
}

func (c *Client) callOptions(opts []CallOption) callOptions {
	o := callOptions{}
	for _, f := range opts {
		f(&o)
	}
	if o.policy == nil {
		o.policy = &c.policy
	}
	return o
}

// withTimeout applies the client's default timeout to a context without a
// deadline.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || c.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.timeout)
}
