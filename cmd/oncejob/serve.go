package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/oncejob/oncejob/config"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/maintenance"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/server/groupcommit"
	"github.com/oncejob/oncejob/server/pagetoken"
	"github.com/oncejob/oncejob/server/readiness"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/telemetry"
	"github.com/oncejob/oncejob/watch"
)

func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	grpcAddr := fs.String("grpc-addr", "127.0.0.1:7070", "address the gRPC server listens on")
	apiKeysPath := fs.String("api-keys", "", "YAML file of hashed API keys and their tenants; none: dev mode, one tenant \"default\", no auth")
	window := fs.Duration("idempotency-window", maintenance.IdempotencyKeyWindowDefault, "how long an idempotency key is remembered")
	maxDoc := fs.Int("max-document-bytes", server.DefaultMaxDocumentBytes, "largest document accepted")
	linger := fs.Duration("submit-linger", groupcommit.DefaultLinger, "how long a new-key SubmitJob waits for others to be written with it in one store write (group commit); 0 writes each alone")
	maxBatch := fs.Int("submit-max-batch", groupcommit.DefaultMaxBatch, "most SubmitJob calls written in one store write; a full group is written at once")
	stf := storeFlags(fs, true)
	eng := engineFlags(fs)
	lf := logFlags(fs)
	cfgPath := configFlag(fs)
	rel := relayFlags(fs, 1)
	sched := schedulerFlags(fs)
	readURL := fs.String("read-database-url", "", "Postgres URL (a standby) for ListJobs and CountJobs, which may be stale; empty: the primary. Never the idempotency check, the engine or the relay")
	storeTimeout := fs.Duration("store-timeout", server.DefaultStoreTimeout, "longest a unary call waits on the store; then UNAVAILABLE (store unavailable)")
	httpCfg := httpFlags(fs)
	lo := listenFlags(fs)
	limitsFlags := limitFlags(fs)
	keyCacheTTL := fs.Duration("key-cache-ttl", tenant.DefaultCacheTTL, "how long a key of `oncejob keys` is trusted before it is read again: a revocation reaches every replica within it")
	tf := telemetryFlags(fs, "the HTTP address serves GET /metrics too")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := lf.logger()
	if err != nil {
		return err
	}
	obs, err := tf.start(ctx, "oncejob", logger)
	if err != nil {
		return err
	}
	defer obs.stop()
	if *window <= 0 {
		return errors.New("--idempotency-window must be positive")
	}
	if *maxDoc <= 0 {
		return errors.New("--max-document-bytes must be positive")
	}
	if *storeTimeout <= 0 {
		return errors.New("--store-timeout must be positive")
	}
	if *linger < 0 {
		return errors.New("--submit-linger must not be negative")
	}
	if *linger == 0 {
		*linger = -1 // server.Config: negative is no linger, zero the default
	}
	if *maxBatch < 1 {
		return errors.New("--submit-max-batch must be at least 1")
	}

	listen, err := lo.listeners(logger)
	if err != nil {
		return err
	}
	httpCfg.tls = listen.httpTLS
	pipelines, err := eng.pipelines()
	if err != nil {
		return err
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	keys := &tenant.Keys{}
	if *apiKeysPath != "" {
		if keys, err = tenant.LoadKeys(*apiKeysPath); err != nil {
			return err
		}
	}

	st, where, err := stf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	apiStore, closeReads, err := withStandbyReads(ctx, st, *readURL)
	if err != nil {
		return err
	}
	defer closeReads()
	lim, err := newLimits(limitsFlags, cfg, st, logger)
	if err != nil {
		return err
	}
	if *keyCacheTTL <= 0 {
		return errors.New("--key-cache-ttl must be positive")
	}

	wake := make(chan struct{}, 1) // the relay's, poked by the hub's notifications
	hub, err := watch.New(watch.Config{Store: wakeOnListen{WatchStore: st, wake: wake}, Logger: logger})
	if err != nil {
		return err
	}
	hubCtx, stopHub := context.WithCancel(ctx)
	defer stopHub()
	go hub.Run(hubCtx)
	obs.metrics.Register(telemetry.NewStatsCollector(st, logger), telemetry.WatchersOpen(hub.Active))

	// Every replica of the store reads the one secret, so a page token one
	// issued pages on another (docs/architecture.md, "Page tokens").
	tokenSecret, err := pagetoken.LoadSecret(ctx, st)
	if err != nil {
		return err
	}
	s, err := server.New(server.Config{
		Store:            apiStore,
		Pipelines:        pipelines,
		ProviderBatches:  eng.hasBatchAPI(),
		Keys:             keys,
		KeyStore:         st,
		KeyCacheTTL:      *keyCacheTTL,
		Limits:           lim,
		Logger:           logger,
		MaxDocumentBytes: *maxDoc,
		StoreTimeout:     *storeTimeout,
		SubmitLinger:     *linger,
		SubmitMaxBatch:   *maxBatch,
		Watch:            hub,
		Transport:        listen.transport,
		Metrics:          obs.metrics.GRPC,
		Tracing:          obs.tracing,
		PageTokenSecret:  tokenSecret,
	})
	if err != nil {
		return err
	}
	obs.metrics.Register(telemetry.EdgeRefusals(s.Auth.Refused, s.MalformedRequests)...)
	srv, health := s.GRPC, s.Health
	// Readiness: JobService's health follows the store; "" is liveness.
	probe, err := readiness.New(readiness.Config{
		Store:    st,
		Health:   health,
		Services: []string{oncejobv1.JobService_ServiceDesc.ServiceName},
		Logger:   logger,
	})
	if err != nil {
		return err
	}
	probeCtx, stopProbe := context.WithCancel(ctx)
	defer stopProbe()
	go probe.Run(probeCtx)

	lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", *grpcAddr)
	if err != nil {
		return err
	}
	devMode := s.Auth.DevMode(ctx)
	httpFace, err := httpCfg.start(ctx, s, probe, obs.metrics.Handler(), *maxDoc, devMode, logger)
	if err != nil {
		_ = lis.Close()
		return err
	}

	if devMode {
		logger.Warn("DEV MODE: no --api-keys configured and no key in the store; every caller is tenant \"default\" and nothing is authenticated. Do not expose this server. (It leaves dev mode by itself once `oncejob keys create` makes a key.)")
	}
	logger.Info("oncejob serving", "tls", listen.tls(), "grpc_addr", lis.Addr().String(), "http_addr", httpFace.addr, "store", where, "pipelines", pipelines.Names(), "idempotency_window", window.String())
	printBanner(lis.Addr().String(), httpFace.addr, where, eng, listen.tls())

	sweepCtx, stopSweep := context.WithCancel(ctx)
	defer stopSweep()
	go (&maintenance.IdempotencyKeySweeper{Store: st, Window: *window, Logger: logger}).Run(sweepCtx)

	workersCtx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorkers()
	waitWorkers, err := eng.startWorkers(workersCtx, st, pipelines, obs, logger)
	if err != nil {
		return err
	}
	defer waitWorkers()
	defer stopWorkers() // runs first: stop the workers, then wait for them

	relaysCtx, stopRelays := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRelays()
	waitRelays, relayHealth, err := rel.startRelays(relaysCtx, st, cfg, wake, obs, logger)
	if err != nil {
		return err
	}
	if relayHealth != nil {
		probe.AddCheck(readiness.Check{Name: "relay", Err: relayHealth})
	}
	defer waitRelays()
	defer stopRelays()

	schedCtx, stopSched := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSched()
	waitSched, err := sched.startScheduler(schedCtx, st, pipelines, logger)
	if err != nil {
		return err
	}
	defer waitSched()
	defer stopSched()

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down", "watches", hub.Active())
	health.Shutdown()
	// Watch streams never end on their own: end them, each telling its
	// client where to resume, or GracefulStop would wait for them.
	hub.Shutdown()
	httpFace.stop(10 * time.Second)
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		srv.Stop()
	}
	return nil
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
