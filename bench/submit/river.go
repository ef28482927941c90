package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// documentArgs is a River job carrying the same document as a SubmitJobs
// item, so both write the same payload.
type documentArgs struct {
	Key      string `json:"key"`
	Pipeline string `json:"pipeline"`
	Text     string `json:"text"`
}

func (documentArgs) Kind() string { return "bench_document" }

// riverInsertMany inserts batches of batchSize River jobs with InsertMany
// from conc goroutines for d, into a fresh River schema in database db, as
// an insert-only client (River's own way to enqueue from a process that
// works no jobs). It returns the jobs inserted and the time taken.
func riverInsertMany(ctx context.Context, dbURL string, conc, batchSize int, filler string, d time.Duration) (int, time.Duration, error) {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return 0, 0, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return 0, 0, fmt.Errorf("river migrate: %w", err)
	}
	client, err := river.NewClient(driver, &river.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return 0, 0, err
	}

	var (
		inserted atomic.Int64
		next     atomic.Int64
		failed   atomic.Value
		wg       sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && failed.Load() == nil {
				n := next.Add(1)
				batch := make([]river.InsertManyParams, batchSize)
				for i := range batch {
					key := fmt.Sprintf("river-%d-%d", n, i)
					batch[i] = river.InsertManyParams{Args: documentArgs{Key: key, Pipeline: "summarize", Text: key + " " + filler}}
				}
				res, err := client.InsertMany(ctx, batch)
				if err == nil && len(res) != batchSize {
					err = fmt.Errorf("InsertMany of %d returned %d results", batchSize, len(res))
				}
				if err != nil {
					failed.Store(err)
					return
				}
				inserted.Add(int64(len(res)))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, ok := failed.Load().(error); ok {
		return 0, 0, fmt.Errorf("river InsertMany: %w", err)
	}
	if inserted.Load() == 0 {
		return 0, 0, errors.New("river InsertMany: nothing inserted")
	}
	return int(inserted.Load()), elapsed, nil
}
