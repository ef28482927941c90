package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/worker"
)

// TestBatcherBoundsFileBytes: a provider batch closes before its input
// file would pass max_bytes, and a call larger than the bound alone goes in
// a batch of its own. Six calls of ~3.1-4 KB lines each (a 3,000-byte
// document plus the request around it), all collected within one linger:
// at 9,000 bytes two lines fit and a third does not (3 batches); at 1,000
// bytes no two fit (6 batches). Every call is billed once, at the batch
// price, none online.
func TestBatcherBoundsFileBytes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		maxBytes int64
		batches  int64
	}{{9000, 3}, {1000, 6}, {0, 1}} { // 0: the default (100 MiB) holds all six
		t.Run(fmt.Sprint(c.maxBytes), func(t *testing.T) {
			t.Parallel()
			b := setup(t, llmsim.Faults{})
			reg, err := pipeline.Parse([]byte(fmt.Sprintf("model_profiles:\n  default: {model: sim-1, prompt_micros_per_1k: 100, completion_micros_per_1k: 200, provider_batch: {max_calls: 1000, linger: 3s, max_bytes: %d}}\npipelines:\n", c.maxBytes) +
				summarize(1, "1", summarizeSchema, "")))
			require.NoError(t, err)
			var jobs []*store.Job
			for i := range 6 {
				text := fmt.Sprintf("Document %d. ", i) + strings.Repeat("Revenue grew. ", 3000/14)
				jobs = append(jobs, submit(t, b.store, reg, "acme", text[:3000]))
			}
			provider, err := llm.NewOpenAI(llm.Config{BaseURL: b.sim.URL, Timeout: 10 * time.Second, Batches: true})
			require.NoError(t, err)
			w, err := worker.New(worker.Config{
				Store: b.store, Provider: provider, Pipelines: reg, Concurrency: 6,
				LeaseDuration: 10 * time.Second, PollInterval: 20 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
			})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = w.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })

			for _, job := range jobs {
				got := waitTerminal(t, b.store, job)
				require.Equal(t, store.JobStatusSucceeded, got.Status, "error: %+v", got.Error)
			}
			st := b.sim.Stats()
			require.EqualValues(t, 6, st.BatchBilledCalls)
			require.Zero(t, st.BilledCalls)
			require.Equal(t, c.batches, st.BatchesCreated, "batches for six ~3.5 KB lines under max_bytes %d", c.maxBytes)
		})
	}
}
