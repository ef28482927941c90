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

	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/server/idempotency"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store/storepg"
)

func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	grpcAddr := fs.String("grpc-addr", "127.0.0.1:7070", "address the gRPC server listens on")
	databaseURL := fs.String("database-url", "", "Postgres URL, e.g. postgres://user@host:5432/db")
	pipelinesPath := fs.String("pipelines", "", "YAML file of pipelines, added to the built-in ones")
	apiKeysPath := fs.String("api-keys", "", "YAML file of hashed API keys and their tenants; none: dev mode, one tenant \"default\", no auth")
	window := fs.Duration("idempotency-window", 24*time.Hour, "how long an idempotency key is remembered")
	maxDoc := fs.Int("max-document-bytes", server.DefaultMaxDocumentBytes, "largest document accepted")
	migrate := fs.Bool("migrate", false, "apply database migrations before serving")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(*logLevel)
	if err != nil {
		return err
	}
	if *databaseURL == "" {
		return errors.New("--database-url (or ONCEJOB_DATABASE_URL) is required: the embedded store is not built yet")
	}
	if *window <= 0 {
		return errors.New("--idempotency-window must be positive")
	}
	if *maxDoc <= 0 {
		return errors.New("--max-document-bytes must be positive")
	}

	pipelines := pipeline.Builtin()
	if *pipelinesPath != "" {
		if pipelines, err = pipeline.Load(*pipelinesPath); err != nil {
			return err
		}
	}
	keys := &tenant.Keys{}
	if *apiKeysPath != "" {
		if keys, err = tenant.LoadKeys(*apiKeysPath); err != nil {
			return err
		}
	}

	st, err := storepg.Open(ctx, *databaseURL)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer st.Close()
	if *migrate {
		if err := storepg.Migrate(ctx, st.Pool()); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}

	srv, health, err := server.New(server.Config{
		Store:            st,
		Pipelines:        pipelines,
		Keys:             keys,
		Logger:           logger,
		MaxDocumentBytes: *maxDoc,
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
	logger.Info("oncejob serving", "grpc_addr", lis.Addr().String(), "pipelines", pipelines.Names(), "idempotency_window", window.String())

	janitorCtx, stopJanitor := context.WithCancel(ctx)
	defer stopJanitor()
	go (&idempotency.Janitor{Store: st, Window: *window, Logger: logger}).Run(janitorCtx)

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	health.Shutdown()
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
