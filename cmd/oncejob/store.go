package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storesqlite"
	"github.com/oncejob/oncejob/worker"
)

// appStore is everything the server, the workers and the watch hub need.
// Both stores implement it; only this command chooses one.
type appStore interface {
	worker.Store
	store.OperatorStore
	store.WatchStore
}

var (
	_ appStore = (*storepg.Store)(nil)
	_ appStore = (*storesqlite.Store)(nil)
)

// openStore opens Postgres when databaseURL is set, else the embedded SQLite
// store in dataDir (which migrates itself and holds a lock on the directory,
// so a second process on it gets a clear error). where says which, for the
// start banner.
func openStore(ctx context.Context, databaseURL, dataDir string, migrate bool) (st appStore, where string, err error) {
	if databaseURL == "" {
		s, err := storesqlite.Open(ctx, storesqlite.Config{DataDir: dataDir})
		if err != nil {
			return nil, "", err
		}
		abs, _ := filepath.Abs(dataDir)
		return s, "embedded SQLite in " + abs, nil
	}
	s, err := storepg.Open(ctx, databaseURL)
	if err != nil {
		return nil, "", fmt.Errorf("open database: %w", err)
	}
	if migrate {
		if err := storepg.Migrate(ctx, s.Pool()); err != nil {
			s.Close()
			return nil, "", fmt.Errorf("migrate: %w", err)
		}
	}
	return s, "Postgres", nil
}

// printBanner tells a person at a terminal where the server is and how to
// try it.
func printBanner(addr, where string, eng *engineOpts) {
	provider := eng.llmBaseURL
	if provider == "" {
		provider = "the built-in LLM simulator (no API key needed)"
	}
	fmt.Fprintf(os.Stderr, `
oncejob is serving gRPC on %[1]s
  store:    %[2]s
  provider: %[3]s
  workers:  %[4]d in this process

Submit a job:
  grpcurl -plaintext -H 'idempotency-key: hello-1' -d '{"pipeline": "summarize", "document": {"text": "oncejob runs LLM document jobs so that every effect happens once."}}' %[1]s oncejob.v1.JobService/SubmitJob
Watch it (use the id from the answer):
  grpcurl -plaintext -d '{"job_id": "<id>"}' %[1]s oncejob.v1.JobService/WatchJob

`, addr, where, provider, eng.workers)
}
