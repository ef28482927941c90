package worker_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/jobkey"
	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/worker"
)

// submitTwin inserts a job of the batch twin of the "default" profile, as
// the server does for an item of a provider_batch run.
func submitTwin(t *testing.T, st store.Store, reg *pipeline.Registry, text string) *store.Job {
	t.Helper()
	profile := reg.BatchTwin("default")
	require.Equal(t, "default@batch", profile)
	return submitOnProfile(t, st, reg, profile, text)
}

// submitOnProfile inserts a job of the "summarize" pipeline on profile.
func submitOnProfile(t *testing.T, st store.Store, reg *pipeline.Registry, profile, text string) *store.Job {
	t.Helper()
	p, _ := reg.Get("summarize")
	docSHA := jobkey.DocumentSHA256([]byte(text))
	dedup, err := jobkey.DedupKey(jobkey.Computation{
		Tenant: "acme", DocumentSHA256: docSHA, MediaType: "text/plain", Pipeline: p.Name,
		PipelineVersion: p.Version, PromptVersion: p.Prompt.Version, ModelProfile: profile,
	})
	require.NoError(t, err)
	res, err := st.JobSubmit(context.Background(), &store.JobSubmitParams{
		ID: uuid.NewString(), Tenant: "acme", Method: "/oncejob.v1.JobService/SubmitJob",
		IdempotencyKey: uuid.NewString(), Fingerprint: "fp", DedupKey: dedup,
		Pipeline: p.Name, PipelineVersion: p.Version, PromptVersion: p.Prompt.Version, ModelProfile: profile,
		Document: []byte(text), DocumentSHA256: docSHA, DocumentMedia: "text/plain", Params: []byte(`{}`),
	})
	require.NoError(t, err)
	return res.Job
}

// TestBatchTwinGoesThroughTheBatchAPI: a job of a profile's batch twin is
// answered by a provider batch, billed at the batch price, never online.
func TestBatchTwinGoesThroughTheBatchAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{})
	reg := registry(t, summarize(1, "1", summarizeSchema, ""))
	job := submitTwin(t, b.store, reg, "Quarterly report. Revenue grew.")
	provider, err := llm.NewOpenAI(llm.Config{BaseURL: b.sim.URL, Timeout: 10 * time.Second, Batches: true})
	require.NoError(t, err)
	w, err := worker.New(worker.Config{
		Store: b.store, Provider: provider, Pipelines: reg, Concurrency: 2,
		LeaseDuration: 5 * time.Second, PollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	got := waitTerminal(t, b.store, job)
	require.Equal(t, store.JobStatusSucceeded, got.Status, "error: %+v", got.Error)
	st := b.sim.Stats()
	require.EqualValues(t, 1, st.BatchBilledCalls)
	require.Zero(t, st.BilledCalls)
	online, _ := reg.Profile("default")
	require.Equal(t, online.BatchCostMicros(got.Usage.PromptTokens, got.Usage.CompletionTokens), got.Usage.CostMicros, "billed at the batch price")
}

// TestBatchTwinRefusedWithoutBatchAPI: a worker whose provider has no batch
// API fails a batch twin's job at once, saying why, and calls nothing
// online in its place.
func TestBatchTwinRefusedWithoutBatchAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{})
	reg := registry(t, summarize(1, "1", summarizeSchema, ""))
	job := submitTwin(t, b.store, reg, "Quarterly report. Revenue grew.")
	b.startWorker(t, reg, 0)
	requireFailedAtOnce(t, b.store, job, "PROVIDER_BATCH_UNSUPPORTED")
	st := b.sim.Stats()
	require.Zero(t, st.BilledCalls)
	require.Zero(t, st.BatchBilledCalls)
}
