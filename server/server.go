// Package server is oncejob's gRPC front: the JobService handlers, the
// interceptor chain and the mapping of domain errors to gRPC statuses with
// google.rpc details.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/server/groupcommit"
	"github.com/oncejob/oncejob/server/idempotency"
	"github.com/oncejob/oncejob/server/limits"
	"github.com/oncejob/oncejob/server/membudget"
	"github.com/oncejob/oncejob/server/pagetoken"
	"github.com/oncejob/oncejob/server/requestid"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/watch"
)

// Config is what a Server needs. Zero fields take the defaults stated.
type Config struct {
	// Store holds jobs. Required.
	Store Store
	// Pipelines are the pipelines jobs may name. Default:
	// pipeline.Builtin().
	Pipelines *pipeline.Registry
	// ProviderBatches says the workers' LLM provider has a batch API
	// (OpenAI's Files and Batches), so a run may ask for provider_batch.
	// Default: false, such runs are refused.
	ProviderBatches bool
	// Keys are the keys of the --api-keys file. With none here and none in
	// KeyStore ever, the server is in dev mode: every caller is an operator
	// of tenant "default" (see AuthMode). Default: none.
	Keys *tenant.Keys
	// AuthMode says when callers without a key are let in (tenant.Mode).
	// Default tenant.ModeAuto.
	AuthMode tenant.Mode
	// KeyStore holds the keys `oncejob keys create` made; they add to Keys.
	// Default: none.
	KeyStore store.APIKeyStore
	// KeyCacheTTL bounds how long a store key is trusted before it is read
	// again, so a revocation reaches every replica within it. Default
	// tenant.DefaultCacheTTL (1s).
	KeyCacheTTL time.Duration
	// Limits are the per-tenant limits. Default: none.
	Limits *limits.Limits
	// ProviderLimitUse reports a provider limit's pace and use as this
	// process's workers see it (llm/pace), for a run's progress; nil, or
	// an answer of nil: only the configured limit is known. Default: none.
	ProviderLimitUse func(limit string) *oncejobv1.ProviderLimitUse
	// Logger receives one line per RPC. Default: slog.Default().
	Logger *slog.Logger
	// MaxDocumentBytes bounds a submitted document. Default:
	// DefaultMaxDocumentBytes (8 MiB).
	MaxDocumentBytes int
	// StoreTimeout bounds the work of one unary call (its store queries);
	// `serve` sets DefaultStoreTimeout (--store-timeout). Default: 0, no
	// bound. A call whose own deadline is sooner keeps it. Watch streams
	// are not bounded.
	StoreTimeout time.Duration
	// SubmitLinger is how long a new-key SubmitJob waits for concurrent
	// ones to be written with it in one store write (group commit). Default
	// groupcommit.DefaultLinger (1ms); negative: none, each is written alone.
	SubmitLinger time.Duration
	// SubmitMaxBatch writes a group at once when it holds this many
	// submissions. Default groupcommit.DefaultMaxBatch (128).
	SubmitMaxBatch int
	// Watch serves WatchJob and WatchJobs. Default: none, both are
	// UNIMPLEMENTED. The caller runs it (Hub.Run) and, before GracefulStop,
	// shuts it down (Hub.Shutdown) so open streams end with where to resume.
	Watch *watch.Hub
	// Memory is the process's memory budget: list pages draw the bytes
	// they hold from it (docs/operations.md, "Memory budget"). Default:
	// none, unlimited.
	Memory *membudget.Budget
	// Transport are the connections' limits and TLS; zero fields take
	// their defaults (see Transport).
	Transport Transport
	// Metrics, when set, counts and times every RPC, first in the chain
	// (go-grpc-middleware's Prometheus provider). Default: none.
	Metrics *grpcprom.ServerMetrics
	// PageTokenSecret is the secret page tokens and watch cursors are
	// sealed under (docs/architecture.md, "Page tokens"). Every replica of
	// one store needs the same one, so that a token one issued pages on
	// another: `serve` reads it from the store (pagetoken.LoadSecret). At
	// least pagetoken.MinSecretBytes. Default: a random secret of this
	// server, whose tokens no other server takes.
	PageTokenSecret []byte
	// Tracing traces every RPC (otelgrpc, with the process's tracer
	// provider and propagator: see telemetry.StartTracing), and a job
	// created by SubmitJob keeps the call's trace context. Default: off.
	Tracing bool
}

// streamWorkers is how many goroutines serve the connections' RPCs, each
// one after another (grpc.NumStreamWorkers); an RPC that finds none free
// gets a goroutine of its own, as every RPC did before. A worker keeps the
// stack its calls grew (the interceptor chain, pgx), where a new goroutine
// per call grew and copied it every time: 9-10 % of the server's CPU in
// 32 concurrent SubmitJob replays (docs/performance.md, "Submitting").
// grpc-go replaces a worker after 65,536 calls, so a stack grown once by a
// deep call is given back.
func streamWorkers() uint32 {
	return uint32(max(64, 16*runtime.GOMAXPROCS(0)))
}

// DefaultMaxDocumentBytes is the default document size limit.
const DefaultMaxDocumentBytes = 8 << 20

// maxMessageOverhead is what a SubmitJobRequest may carry beside its
// document (params, labels, names): the gRPC receive limit is the document
// limit plus this, so an oversized document still reaches validation and gets
// a clear error rather than the transport's RESOURCE_EXHAUSTED.
const maxMessageOverhead = 1 << 20

// MaxMessageBytes is the gRPC receive limit of a server whose document
// limit is maxDocumentBytes.
func MaxMessageBytes(maxDocumentBytes int) int { return maxDocumentBytes + maxMessageOverhead }

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Pipelines == nil {
		c.Pipelines = pipeline.Builtin()
	}
	if c.Keys == nil {
		c.Keys = &tenant.Keys{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxDocumentBytes == 0 {
		c.MaxDocumentBytes = DefaultMaxDocumentBytes
	}
	c.Transport = c.Transport.WithDefaults()
	if len(c.PageTokenSecret) == 0 {
		c.PageTokenSecret = pagetoken.NewSecret()
	}
	return c
}

func (c Config) validate() error {
	if c.Store == nil {
		return errors.New("server: Config.Store is required")
	}
	if c.MaxDocumentBytes < 0 {
		return errors.New("server: Config.MaxDocumentBytes must not be negative")
	}
	if c.StoreTimeout < 0 {
		return errors.New("server: Config.StoreTimeout must not be negative")
	}
	if _, err := pagetoken.New(c.PageTokenSecret); err != nil {
		return fmt.Errorf("server: Config.PageTokenSecret: %w", err)
	}
	return c.Transport.validate()
}

// Server is a JobService: the gRPC server (with health and reflection), its
// health status, and Local, which runs its streaming RPCs in process
// through the same stream chain.
type Server struct {
	GRPC   *grpc.Server
	Health *health.Server
	Local  *Local
	// Auth authenticates callers; DevMode says whether it lets anyone in.
	Auth *tenant.Authenticator
	// MalformedRequests counts the requests refused with INVALID_ARGUMENT
	// because they were not valid protobuf (see requestCodec).
	MalformedRequests func() int64
	// Memory is Config.Memory, for the HTTP face's bodies to draw from.
	Memory *membudget.Budget
}

// New returns a gRPC server with JobService, health and reflection
// registered, behind the interceptor chain, in this order:
//
//	[metrics] -> malformed request -> request id -> logging -> recovery -> auth and role (not on
//	health or reflection) -> SubmitJobs batch size -> tenant limits ->
//	request validation -> tenant's store slot -> idempotency key -> store timeout
//
// Limits sit after auth (they are per tenant) and before validation and
// the store, so a tenant over its rate costs the server a map lookup; a
// valid call then waits for one of its tenant's store slots
// (limits.Tenant.StoreCalls), so no tenant holds the store's every
// connection.
//
// Streams run the same chain up to auth; their request is validated as the
// handler receives it. An open stream authenticates again every half key
// cache TTL and ends when its key was revoked (recheckStreamInterceptor).
//
// Logging sits outside recovery so a recovered panic is logged as INTERNAL;
// it never logs metadata or payloads, so API keys never reach the log.
func New(cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	submits, err := groupcommit.New(groupcommit.Config{
		SubmitMany: cfg.Store.JobSubmitMany,
		Linger:     cfg.SubmitLinger,
		MaxBatch:   cfg.SubmitMaxBatch,
		Timeout:    cfg.StoreTimeout, // a group's write is bounded as a call's is
	})
	if err != nil {
		return nil, err
	}
	tokens, _ := pagetoken.New(cfg.PageTokenSecret) // validated
	svc := &jobService{cfg: cfg, submits: submits, tokens: tokens}
	authn := tenant.NewAuthenticator(tenant.AuthConfig{File: cfg.Keys, Store: cfg.KeyStore, CacheTTL: cfg.KeyCacheTTL, Logger: cfg.Logger, Mode: cfg.AuthMode})
	codec := newRequestCodec(cfg.Logger, cfg.Memory)
	refusals := newRefusalBound()
	callLog := boundRefusals(slogAdapter(cfg.Logger), refusals) // one bound for the tap's refusals and the chain's
	unary, stream, serverOpts := chains(cfg, svc, authn, codec, callLog, refusals)
	streamChain := chainStream(stream...)

	srv := grpc.NewServer(append(serverOpts,
		grpc.MaxRecvMsgSize(MaxMessageBytes(cfg.MaxDocumentBytes)),
		grpc.NumStreamWorkers(streamWorkers()),
		grpc.KeepaliveParams(cfg.Transport.keepaliveParams()),
		grpc.KeepaliveEnforcementPolicy(cfg.Transport.enforcementPolicy()),
		grpc.MaxConcurrentStreams(cfg.Transport.MaxConcurrentStreams),
		grpc.ConnectionTimeout(cfg.Transport.HandshakeTimeout),
		grpc.InTapHandle((&edge{auth: authn, readTimeout: cfg.Transport.RequestReadTimeout, log: callLog}).tap),
		grpc.StatsHandler(readDeadlineStats{}),
		grpc.Creds(cfg.Transport.creds()), // nil: plaintext
		grpc.ChainUnaryInterceptor(unary...),
		grpc.StreamInterceptor(streamChain),
	)...)
	oncejobv1.RegisterJobServiceServer(srv, svc)
	oncejobv1.RegisterDeliveryServiceServer(srv, &deliveryService{jobs: svc, store: cfg.Store})
	oncejobv1.RegisterRunServiceServer(srv, &runService{jobs: svc, store: cfg.Store, now: time.Now})
	oncejobv1.RegisterScheduleServiceServer(srv, &scheduleService{jobs: svc, store: cfg.Store, now: time.Now})
	hs := health.NewServer()
	hs.SetServingStatus(oncejobv1.JobService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	if cfg.Metrics != nil {
		cfg.Metrics.InitializeMetrics(srv) // every method's series from the start, at zero
	}
	return &Server{GRPC: srv, Health: hs, Local: newLocal(svc, streamChain), Auth: authn, MalformedRequests: codec.Malformed, Memory: cfg.Memory}, nil
}

// chains are the server's unary and stream chains, in order, and the
// options they need: metrics first, then the refusal of a request that did
// not decode (counted, nothing else runs for it), request ids, the call
// log, panic recovery, authentication, authorisation (streams: the key
// re-checked while open), per-tenant limits, validation and, for unary
// calls, the idempotency key and the store's timeout.
func chains(cfg Config, svc *jobService, authn *tenant.Authenticator, codec *requestCodec, callLog logging.Logger, refusals *refusalBound) ([]grpc.UnaryServerInterceptor, []grpc.StreamServerInterceptor, []grpc.ServerOption) {
	logOpts := []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		logging.WithFieldsFromContext(logFields),
	}
	recoveryOpt := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		cfg.Logger.ErrorContext(ctx, "panic in handler", "panic", p, "stack", string(debug.Stack()), "request_id", requestid.FromContext(ctx))
		return status.Error(codes.Internal, "internal error")
	})
	needsAuth := selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return c.Service != healthpb.Health_ServiceDesc.ServiceName &&
			c.Service != "grpc.reflection.v1.ServerReflection" &&
			c.Service != "grpc.reflection.v1alpha.ServerReflection"
	})
	authFunc := withLogTenant(authn.AuthFunc())
	lim := cfg.Limits
	if lim == nil {
		lim = limits.None()
	}
	var (
		unary      []grpc.UnaryServerInterceptor
		stream     []grpc.StreamServerInterceptor
		serverOpts = []grpc.ServerOption{grpc.ForceServerCodecV2(codec)}
	)
	if cfg.Metrics != nil {
		unary = append(unary, cfg.Metrics.UnaryServerInterceptor())
		stream = append(stream, cfg.Metrics.StreamServerInterceptor())
	}
	if cfg.Tracing {
		serverOpts = append(serverOpts, grpc.StatsHandler(otelgrpc.NewServerHandler()))
	}
	stream = append(stream,
		codec.malformedStream,
		withLogHolderStream,
		requestid.StreamServerInterceptor(),
		logging.StreamServerInterceptor(callLog, logOpts...),
		recovery.StreamServerInterceptor(recoveryOpt),
		selector.StreamServerInterceptor(auth.StreamServerInterceptor(authFunc), needsAuth),
		selector.StreamServerInterceptor(authzStreamInterceptor(cfg.Logger), needsAuth),
		selector.StreamServerInterceptor(recheckStreamInterceptor(authn.AuthFunc(), authn.CacheTTL()/2, cfg.Logger), needsAuth),
		selector.StreamServerInterceptor(lim.StreamServerInterceptor(), needsAuth),
		validationStreamInterceptor(svc.validate),
	)
	unary = append(unary,
		codec.malformedUnary,
		withLogHolder,
		requestid.UnaryServerInterceptor(),
		callLogUnary(cfg.Logger, refusals), // the stream interceptor's line, cheaper (calllog.go)
		recovery.UnaryServerInterceptor(recoveryOpt),
		selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(authFunc), needsAuth),
		selector.UnaryServerInterceptor(authzUnaryInterceptor(cfg.Logger), needsAuth),
		batchSizeInterceptor,
		selector.UnaryServerInterceptor(lim.UnaryServerInterceptor(), needsAuth),
		validationInterceptor(svc.validateAll),
		selector.UnaryServerInterceptor(lim.StoreCallsInterceptor(), needsAuth),
		// Health and reflection have no tenant to scope a key by: an
		// idempotency-key a proxy adds to them is ignored.
		selector.UnaryServerInterceptor(idempotency.UnaryServerInterceptor(slices.Concat([]string{oncejobv1.JobService_SubmitJob_FullMethodName}, operatorMethods, runMethods, scheduleMethods)...), needsAuth),
		storeTimeoutInterceptor(cfg.StoreTimeout), // a no-op when 0
	)
	return unary, stream, serverOpts
}

func slogAdapter(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}
