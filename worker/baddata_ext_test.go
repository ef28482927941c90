package worker_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/worker"
)

// A job that holds bad data of its own fails at once with the reason: one
// attempt, no lease takeover, none of the five leases a store outage would
// cost (docs/architecture.md, "Bad input").
func requireFailedAtOnce(t *testing.T, st store.Store, job *store.Job, code string) {
	t.Helper()
	got := waitTerminal(t, st, job)
	require.Equal(t, store.JobStatusFailed, got.Status, "error: %+v", got.Error)
	require.NotNil(t, got.Error)
	require.Equal(t, code, got.Error.Code)
	require.False(t, got.Error.Retryable)
	require.EqualValues(t, 1, got.Attempt, "no lease takeover")
	running := 0
	for _, e := range events(t, st, got) {
		if e.Status == store.JobStatusRunning && e.Stage == store.JobStageUploaded {
			running++ // one per claim: a takeover would add one
		}
	}
	require.Equal(t, 1, running, "claimed once")
}

func TestDocumentWithNULFailsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{})
	reg := registry(t, summarize(1, "1", summarizeSchema, ""))
	// Written the way a server before the NUL rule wrote it.
	job := submit(t, b.store, reg, "acme", "Quarterly report.\x00 Revenue grew.")
	b.startWorker(t, reg, 0)
	requireFailedAtOnce(t, b.store, job, "INVALID_DOCUMENT")
	require.Zero(t, b.sim.Stats().BilledCalls, "nothing was sent to the model")
}

// A model's output Postgres refuses (jsonb holds no \u0000) is the job's own
// bad data, not an outage.
func TestOutputTheStoreRefusesFailsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{})
	reg := registry(t, summarize(1, "1", summarizeSchema, ""))
	job := submit(t, b.store, reg, "acme", "Quarterly report. Revenue grew.")

	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		content := `{"summary": "grew\u0000", "key_points": []}`
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "model": "sim-1",
			"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5},
		})
	}))
	t.Cleanup(model.Close)
	provider, err := llm.NewOpenAI(llm.Config{BaseURL: model.URL, Timeout: 10 * time.Second})
	require.NoError(t, err)
	w, err := worker.New(worker.Config{
		Store: b.store, Provider: provider, Pipelines: reg, Concurrency: 1,
		LeaseDuration: 5 * time.Second, PollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	requireFailedAtOnce(t, b.store, job, "INVALID_DATA")
}
