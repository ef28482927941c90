package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/server/idempotency"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/watch"
)

func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	grpcAddr := fs.String("grpc-addr", "127.0.0.1:7070", "address the gRPC server listens on")
	databaseURL := fs.String("database-url", "", "Postgres URL, e.g. postgres://user@host:5432/db; empty: the embedded SQLite store in --data-dir")
	dataDir := fs.String("data-dir", "./oncejob-data", "directory of the embedded store, when --database-url is empty")
	pipelinesPath := fs.String("pipelines", "", "YAML file of pipelines, added to the built-in ones")
	apiKeysPath := fs.String("api-keys", "", "YAML file of hashed API keys and their tenants; none: dev mode, one tenant \"default\", no auth")
	window := fs.Duration("idempotency-window", 24*time.Hour, "how long an idempotency key is remembered")
	maxDoc := fs.Int("max-document-bytes", server.DefaultMaxDocumentBytes, "largest document accepted")
	migrate := fs.Bool("migrate", false, "apply database migrations before serving")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	eng := engineFlags(fs, defaultWorkers())
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(*logLevel)
	if err != nil {
		return err
	}
	if *window <= 0 {
		return errors.New("--idempotency-window must be positive")
	}
	if *maxDoc <= 0 {
		return errors.New("--max-document-bytes must be positive")
	}

	pipelines, err := loadPipelines(*pipelinesPath)
	if err != nil {
		return err
	}
	keys := &tenant.Keys{}
	if *apiKeysPath != "" {
		if keys, err = tenant.LoadKeys(*apiKeysPath); err != nil {
			return err
		}
	}

	st, where, err := openStore(ctx, *databaseURL, *dataDir, *migrate)
	if err != nil {
		return err
	}
	defer st.Close()

	hub, err := watch.New(watch.Config{Store: st, Logger: logger})
	if err != nil {
		return err
	}
	hubCtx, stopHub := context.WithCancel(ctx)
	defer stopHub()
	go hub.Run(hubCtx)

	srv, health, err := server.New(server.Config{
		Store:            st,
		Pipelines:        pipelines,
		Keys:             keys,
		Logger:           logger,
		MaxDocumentBytes: *maxDoc,
		Watch:            hub,
	})
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", *grpcAddr)
	if err != nil {
		return err
	}

	if keys.DevMode() {
		logger.Warn("DEV MODE: no --api-keys configured; every caller is tenant \"default\" and nothing is authenticated. Do not expose this server.")
	}
	logger.Info("oncejob serving", "grpc_addr", lis.Addr().String(), "store", where, "pipelines", pipelines.Names(), "idempotency_window", window.String())
	printBanner(lis.Addr().String(), where, eng)

	janitorCtx, stopJanitor := context.WithCancel(ctx)
	defer stopJanitor()
	go (&idempotency.Janitor{Store: st, Window: *window, Logger: logger}).Run(janitorCtx)

	workersCtx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorkers()
	waitWorkers, err := eng.startWorkers(workersCtx, st, pipelines, logger)
	if err != nil {
		return err
	}
	defer waitWorkers()
	defer stopWorkers() // runs first: stop the workers, then wait for them

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
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		srv.Stop()
	}
	return nil
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}
