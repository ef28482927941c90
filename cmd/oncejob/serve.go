package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"time"

	"google.golang.org/grpc"

	"github.com/oncejob/oncejob/config"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/maintenance"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/server/groupcommit"
	"github.com/oncejob/oncejob/server/limits"
	"github.com/oncejob/oncejob/server/membudget"
	"github.com/oncejob/oncejob/server/pagetoken"
	"github.com/oncejob/oncejob/server/readiness"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/telemetry"
	"github.com/oncejob/oncejob/watch"
)

// apiFlags are serve's own flags: the API's bounds and its keys.
type apiFlags struct {
	grpcAddr, apiKeysPath *string
	window                *time.Duration
	maxDoc                *int
	linger                *time.Duration
	maxBatch              *int
	storeTimeout          *time.Duration
	keyCacheTTL           *time.Duration
	memoryBudget          *string
	auth                  *string
}

func serveAPIFlags(fs *flag.FlagSet) *apiFlags {
	return &apiFlags{
		grpcAddr:     fs.String("grpc-addr", "127.0.0.1:7070", "address the gRPC server listens on"),
		apiKeysPath:  fs.String("api-keys", "", "YAML file of hashed API keys and their tenants; they add to the keys made by oncejob keys create"),
		auth:         fs.String("auth", "auto", "when callers without a key are let in (dev mode: one tenant \"default\", no auth): auto (only on a store that has never held a key, with no --api-keys), keys (never) or dev (while no key is active, even on a store that held keys)"),
		window:       fs.Duration("idempotency-window", maintenance.IdempotencyKeyWindowDefault, "how long an idempotency key is remembered"),
		maxDoc:       fs.Int("max-document-bytes", server.DefaultMaxDocumentBytes, "largest document accepted"),
		linger:       fs.Duration("submit-linger", groupcommit.DefaultLinger, "how long a new-key SubmitJob waits for others to be written with it in one store write (group commit); 0 writes each alone"),
		maxBatch:     fs.Int("submit-max-batch", groupcommit.DefaultMaxBatch, "most SubmitJob calls written in one store write; a full group is written at once"),
		storeTimeout: fs.Duration("store-timeout", server.DefaultStoreTimeout, "longest a unary call waits on the store; then UNAVAILABLE (store unavailable)"),
		keyCacheTTL:  fs.Duration("key-cache-ttl", tenant.DefaultCacheTTL, "how long a key made by 'oncejob keys' is trusted before it is read again: a revocation reaches every replica within it"),
		memoryBudget: fs.String("memory-budget", "1GiB", "the memory this process may use (bytes, or with KiB, MiB, GiB): a quarter is the budget that watches, pages and bodies draw from (over it: RESOURCE_EXHAUSTED MEMORY_BUDGET), and the Go runtime's soft limit is nine tenths of it unless GOMEMLIMIT is set"),
	}
}

// memory returns the data budget --memory-budget gives, and sets the Go
// runtime's soft memory limit from it unless GOMEMLIMIT is set.
func (f *apiFlags) memory() *membudget.Budget {
	total, _ := membudget.ParseBytes(*f.memoryBudget) // validated
	data, runtimeLimit := membudget.Split(total)
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(runtimeLimit)
	}
	return membudget.New(data)
}

// validate checks the flags once, before anything starts.
func (f *apiFlags) validate() error {
	switch {
	case *f.window <= 0:
		return errors.New("--idempotency-window must be positive")
	case *f.maxDoc <= 0:
		return errors.New("--max-document-bytes must be positive")
	case *f.storeTimeout <= 0:
		return errors.New("--store-timeout must be positive")
	case *f.linger < 0:
		return errors.New("--submit-linger must not be negative")
	case *f.maxBatch < 1:
		return errors.New("--submit-max-batch must be at least 1")
	case *f.keyCacheTTL <= 0:
		return errors.New("--key-cache-ttl must be positive")
	}
	if n, err := membudget.ParseBytes(*f.memoryBudget); err != nil {
		return fmt.Errorf("--memory-budget: %w", err)
	} else if n < 64<<20 {
		return errors.New("--memory-budget must be at least 64MiB")
	}
	mode, err := tenant.ParseMode(*f.auth)
	if err != nil {
		return fmt.Errorf("--auth: %w", err)
	}
	if mode == tenant.ModeDev && *f.apiKeysPath != "" {
		return errors.New("--auth dev with --api-keys: a keys file ends dev mode; drop one of them")
	}
	return nil
}

// submitLinger is --submit-linger as server.Config takes it: negative is
// no linger, zero the default.
func (f *apiFlags) submitLinger() time.Duration {
	if *f.linger == 0 {
		return -1
	}
	return *f.linger
}

// serveOpts are serve's flags, each group validated by its owner.
type serveOpts struct {
	api     *apiFlags
	proc    *processFlags
	eng     *engineOpts
	rel     *relayOpts
	sched   *schedulerOpts
	readURL *string
	http    *httpOpts
	listen  *listenOpts
	limits  *limits.Tenant
}

func serveFlags(fs *flag.FlagSet) *serveOpts {
	return &serveOpts{
		api:     serveAPIFlags(fs),
		proc:    processFlagsOf(fs, true, "the HTTP address serves GET /metrics too"),
		eng:     engineFlags(fs, 0),
		rel:     relayFlags(fs, 1, 0),
		sched:   schedulerFlags(fs),
		readURL: fs.String("read-database-url", "", "Postgres URL (a standby) for ListJobs and CountJobs, which may be stale; empty: the primary. Never the idempotency check, the engine or the relay"),
		http:    httpFlags(fs),
		listen:  listenFlags(fs),
		limits:  limitFlags(fs),
	}
}

// validate checks serve's flags once, each group by its owner, before
// anything starts.
func (o *serveOpts) validate() error {
	for _, validate := range []func() error{o.api.validate, o.eng.validate, o.rel.validate, o.listen.validate, o.http.validate} {
		if err := validate(); err != nil {
			return err
		}
	}
	return nil
}

func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	o := serveFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	p, err := o.proc.start(ctx, "oncejob")
	if err != nil {
		return err
	}
	defer p.close()
	listen, err := o.listen.listeners(p.logger)
	if err != nil {
		return err
	}
	o.http.tls, o.http.timeouts = listen.httpTLS, listen.http
	pipelines, err := o.eng.pipelines()
	if err != nil {
		return err
	}
	if err := p.open(ctx); err != nil {
		return err
	}
	apiStore, closeReads, err := withStandbyReads(ctx, p.st, p.flags.store.databaseURL != "", *o.readURL)
	if err != nil {
		return err
	}
	defer closeReads()
	lim, err := newLimits(o.limits, p.cfg, p.st, p.st.Connections(), p.logger)
	if err != nil {
		return err
	}

	wake := make(chan struct{}, 1) // the relay's, poked by the hub's notifications
	hub, stopHub, err := p.startHub(ctx, o.api.memory(), wake)
	if err != nil {
		return err
	}
	defer stopHub()

	s, probe, err := o.api.newServer(ctx, serverParts{st: p.st, caps: p.caps, apiStore: apiStore, pipelines: pipelines, batches: o.eng.hasBatchAPI(), limits: lim, limitUse: o.eng.limitUse, hub: hub, listen: listen, obs: p.obs, logger: p.logger})
	if err != nil {
		return err
	}
	defer runBeside(ctx, probe.Run)()

	// Nothing is served before the mode is known: a store whose keys
	// cannot be read yet (down, api_keys locked) is waited for, never
	// taken for one without keys.
	devMode, err := s.Auth.Start(ctx)
	if err != nil {
		return err
	}
	lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", *o.api.grpcAddr)
	if err != nil {
		return err
	}
	httpFace, err := o.http.start(ctx, s, probe, p.obs.metrics.Handler(), *o.api.maxDoc, devMode, p.logger)
	if err != nil {
		_ = lis.Close()
		return err
	}

	announce(p.logger, devMode, *o.api.auth, lis.Addr().String(), httpFace.addr, p.where, pipelines, *o.api.window, o.eng, listen)

	stopBackground, err := startBackground(ctx, backgroundParts{
		st: p.st, caps: p.caps, window: *o.api.window, eng: o.eng, rel: o.rel, sched: o.sched, cfg: p.cfg,
		wake: wake, pipelines: pipelines, limits: lim, maxDoc: *o.api.maxDoc, batches: o.eng.hasBatchAPI(),
		obs: p.obs, probe: probe, logger: p.logger,
	})
	if err != nil {
		return err
	}
	defer stopBackground()

	return serveUntilDone(ctx, s, lis, hub, httpFace, p.logger)
}

// serveUntilDone serves the API on lis until ctx ends, then stops it:
// readiness first, then the watch streams, the HTTP face, and the calls in
// flight, each within its grace.
func serveUntilDone(ctx context.Context, s *server.Server, lis net.Listener, hub *watch.Hub, httpFace *httpFace, logger *slog.Logger) error {
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.GRPC.Serve(lis) }()
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down", "watches", hub.Active())
	s.Health.Shutdown()
	// Watch streams never end on their own: end them, each telling its
	// client where to resume, or GracefulStop would wait for them.
	hub.Shutdown()
	httpFace.stop(10 * time.Second)
	gracefulStop(s.GRPC, 10*time.Second)
	return nil
}

// gracefulStop lets the calls in flight finish, for up to grace.
func gracefulStop(srv *grpc.Server, grace time.Duration) {
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(grace):
		srv.Stop()
	}
}

// printBanner tells a person at a terminal where the server is and how to
// try it.
func printBanner(addr, httpAddr, where string, eng *engineOpts, useTLS bool) {
	provider := eng.llmBaseURL
	if provider == "" {
		provider = "the built-in LLM simulator (no API key needed)"
	}
	console := "off (--http-addr is empty)"
	scheme, grpcurlTLS := "http", "-plaintext"
	if useTLS {
		scheme, grpcurlTLS = "https", "-cacert ca.pem" // and -cert, -key under --tls-client-ca
	}
	if httpAddr != "" {
		console = scheme + "://" + httpAddr + "/  (HTTP/JSON API under /v1/)"
	}
	fmt.Fprintf(os.Stderr, `
oncejob is serving gRPC on %[1]s
  console:  %[5]s
  store:    %[2]s
  provider: %[3]s
  workers:  %[4]d in this process

Submit a job:
  grpcurl %[6]s -H 'idempotency-key: hello-1' -d '{"pipeline": "summarize", "document": {"text": "oncejob runs LLM document jobs so that every effect happens once."}}' %[1]s oncejob.v1.JobService/SubmitJob
Watch it (use the id from the answer):
  grpcurl %[6]s -d '{"job_id": "<id>"}' %[1]s oncejob.v1.JobService/WatchJob

`, addr, where, provider, eng.workers, console, grpcurlTLS)
}

// backgroundParts is what runs beside the API needs.
type backgroundParts struct {
	st        appStore
	caps      storeCaps
	window    time.Duration
	eng       *engineOpts
	rel       *relayOpts
	sched     *schedulerOpts
	cfg       *config.File
	wake      chan struct{}
	pipelines *pipeline.Registry
	limits    *limits.Limits
	maxDoc    int
	batches   bool
	obs       *observability
	probe     *readiness.Probe
	logger    *slog.Logger
}

// startBackground starts what runs beside the API: the idempotency key
// sweeper, the workers, the relays (their health a readiness check) and the
// scheduler. The workers, relays and scheduler outlive ctx until stop: stop
// ends each and waits for it, the last started first.
func startBackground(ctx context.Context, p backgroundParts) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	sweepCtx, stopSweep := context.WithCancel(ctx)
	stops = append(stops, stopSweep)
	go (&maintenance.IdempotencyKeySweeper{Store: p.st, Window: p.window, Logger: p.logger}).Run(sweepCtx)

	// started runs a part under a context of its own, which ctx's end does
	// not cancel: a part stops when stop says so, after the API.
	started := func(start func(ctx context.Context) (wait func(), err error)) error {
		partCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		wait, err := start(partCtx)
		if err != nil {
			cancel()
			return err
		}
		stops = append(stops, func() { cancel(); wait() })
		return nil
	}
	if err := started(func(ctx context.Context) (func(), error) {
		return p.eng.startWorkers(ctx, p.st, p.pipelines, p.obs, p.logger)
	}); err != nil {
		return stop, err
	}
	if err := started(func(ctx context.Context) (func(), error) {
		wait, health, err := p.rel.startRelays(ctx, p.st, p.caps, p.cfg, p.wake, p.obs, p.logger)
		if err == nil && health != nil {
			p.probe.AddCheck(readiness.Check{Name: "relay", Err: health})
		}
		return wait, err
	}); err != nil {
		return stop, err
	}
	if err := started(func(ctx context.Context) (func(), error) {
		return p.sched.startScheduler(ctx, p.st, p.pipelines, p.limits, p.maxDoc, p.batches, p.logger)
	}); err != nil {
		return stop, err
	}
	return stop, nil
}

// serverParts is what the API server is built of beyond serve's flags.
type serverParts struct {
	st        appStore
	caps      storeCaps
	apiStore  server.Store // st, or st with its lists on a standby
	pipelines *pipeline.Registry
	batches   bool // the workers' provider has a batch API
	limits    *limits.Limits
	limitUse  func(string) *oncejobv1.ProviderLimitUse // the workers' provider limits
	hub       *watch.Hub
	listen    *listeners
	obs       *observability
	logger    *slog.Logger
}

// newServer builds the gRPC API from the flags, and its readiness probe:
// JobService's health follows the store; "" is liveness. The API takes
// the keys of --api-keys beside those of the store, and the page-token
// secret every replica of the store shares, so a token one issued pages
// on another (docs/architecture.md, "Page tokens").
func (f *apiFlags) newServer(ctx context.Context, p serverParts) (*server.Server, *readiness.Probe, error) {
	keys := &tenant.Keys{}
	if *f.apiKeysPath != "" {
		var err error
		if keys, err = tenant.LoadKeys(*f.apiKeysPath); err != nil {
			return nil, nil, err
		}
	}
	tokenSecret, err := pagetoken.LoadSecret(ctx, p.st)
	if err != nil {
		return nil, nil, err
	}
	s, err := server.New(server.Config{
		Store:            p.apiStore,
		Pipelines:        p.pipelines,
		ProviderBatches:  p.batches,
		Keys:             keys,
		KeyStore:         p.st,
		KeyCacheTTL:      *f.keyCacheTTL,
		AuthMode:         mustMode(*f.auth),
		Limits:           p.limits,
		Logger:           p.logger,
		MaxDocumentBytes: *f.maxDoc,
		StoreTimeout:     *f.storeTimeout,
		SubmitLinger:     f.submitLinger(),
		SubmitMaxBatch:   *f.maxBatch,
		Watch:            p.hub,
		Memory:           p.hub.Budget(),
		Transport:        p.listen.transport,
		Metrics:          p.obs.metrics.GRPC,
		Tracing:          p.obs.tracing,
		PageTokenSecret:  tokenSecret,
		ProviderLimitUse: p.limitUse,
	})
	if err != nil {
		return nil, nil, err
	}
	p.obs.metrics.Register(telemetry.EdgeRefusals(s.Auth.Refused, s.MalformedRequests)...)
	probe, err := readiness.New(readiness.Config{
		Store:       p.st,
		WritePinger: p.caps.writePinger,
		Health:      s.Health,
		Services:    []string{oncejobv1.JobService_ServiceDesc.ServiceName},
		Logger:      p.logger,
	})
	if err != nil {
		return nil, nil, err
	}
	return s, probe, nil
}

// mustMode is the mode of a validated --auth.
func mustMode(s string) tenant.Mode {
	m, _ := tenant.ParseMode(s)
	return m
}

// runBeside runs run in a goroutine until ctx ends or the returned stop is
// called.
// startHub starts the process's one watch hub (its LISTEN connection and
// fan-out), drawing on budget, and registers its metrics.
func (p *process) startHub(ctx context.Context, budget *membudget.Budget, wake chan struct{}) (*watch.Hub, func(), error) {
	hub, err := watch.New(watch.Config{Store: wakeOnListen{WatchStore: p.st, wake: wake}, Logger: p.logger, Budget: budget})
	if err != nil {
		return nil, nil, err
	}
	p.obs.metrics.Register(telemetry.NewStatsCollector(p.st, p.logger), telemetry.WatchersOpen(hub.Active))
	return hub, runBeside(ctx, hub.Run), nil
}

func runBeside(ctx context.Context, run func(context.Context)) (stop func()) {
	ctx, stop = context.WithCancel(ctx)
	go run(ctx)
	return stop
}

// announce says the server is up: where it listens, on which store, with
// which pipelines, and loudly when it runs in dev mode.
func announce(logger *slog.Logger, devMode bool, authMode, grpcAddr, httpAddr, where string, pipelines *pipeline.Registry, window time.Duration, eng *engineOpts, listen *listeners) {
	switch {
	case devMode && authMode == "dev":
		logger.Warn("DEV MODE (--auth dev): no key of the store is active; every caller is tenant \"default\" and nothing is authenticated. Do not expose this server. (It leaves dev mode by itself once `oncejob keys create` makes a key.)")
	case devMode:
		logger.Warn("DEV MODE: no --api-keys and this store has never held a key; every caller is tenant \"default\" and nothing is authenticated. Do not expose this server. (It leaves dev mode for good once `oncejob keys create` makes a key; --auth keys refuses callers without a key from the start.)")
	default:
		logger.Info("authenticated mode: every caller needs an API key", "auth", authMode)
	}
	logger.Info("oncejob serving", "tls", listen.tls(), "grpc_addr", grpcAddr, "http_addr", httpAddr, "store", where, "pipelines", pipelines.Names(), "idempotency_window", window.String())
	printBanner(grpcAddr, httpAddr, where, eng, listen.tls())
}
