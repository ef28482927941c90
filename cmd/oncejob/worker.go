package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/oncejob/oncejob/store/storepg"
)

// runWorker runs workers only: no gRPC, any number of them beside `serve`
// processes on one Postgres.
func runWorker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	databaseURL := fs.String("database-url", "", "Postgres URL")
	pipelinesPath := fs.String("pipelines", "", "YAML file of pipelines, added to the built-in ones")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	eng := engineFlags(fs, defaultWorkers())
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(*logLevel)
	if err != nil {
		return err
	}
	if *databaseURL == "" {
		return errors.New("--database-url (or ONCEJOB_DATABASE_URL) is required")
	}
	if eng.workers < 1 {
		return errors.New("--workers must be at least 1")
	}
	pipelines, err := loadPipelines(*pipelinesPath)
	if err != nil {
		return err
	}
	st, err := storepg.Open(ctx, *databaseURL)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer st.Close()
	wait, err := eng.startWorkers(ctx, st, pipelines, logger)
	if err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("worker shutting down")
	wait()
	return nil
}
