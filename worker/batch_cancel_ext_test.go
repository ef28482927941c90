package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// TestBatchCancelledWhenItsLastJobIsCancelled: the jobs of a provider batch
// cancelled one at a time, each leaving before the next is cancelled: the
// batch is cancelled at the provider once the last of them leaves, not
// before (the count of calls it carries is what the cancels are held
// against, not the number of polls or leaves so far).
func TestBatchCancelledWhenItsLastJobIsCancelled(t *testing.T) {
	t.Parallel()
	sim, err := llmsim.Start("", llmsim.Config{BatchDelay: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	st := storepgtest.NewTestStore(t)
	b := &testBundle{store: st, sim: sim}
	reg, err := pipeline.Parse([]byte("model_profiles:\n  default: {model: sim-1, prompt_micros_per_1k: 100, completion_micros_per_1k: 200, provider_batch: {max_calls: 3, linger: 30s}}\npipelines:\n" +
		summarize(1, "1", summarizeSchema, "")))
	require.NoError(t, err)
	const n = 3
	jobs := make([]*store.Job, n)
	for i := range jobs {
		jobs[i] = submitOnProfile(t, b.store, reg, "default", "Quarterly report "+string(rune('A'+i))+". Revenue grew.")
	}
	provider, err := llm.NewOpenAI(llm.Config{BaseURL: sim.URL, Timeout: 10 * time.Second, Batches: true})
	require.NoError(t, err)
	b.runWorkerOn(t, reg, provider)
	require.Eventually(t, func() bool { return sim.Stats().BatchesCreated == 1 }, 30*time.Second, 10*time.Millisecond)

	for i, job := range jobs {
		_, err := st.JobCancel(context.Background(), &store.JobCancelParams{Tenant: job.Tenant, ID: job.ID, Message: "test"})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			got, err := b.store.JobGetByID(context.Background(), &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
			return err == nil && got.Status == store.JobStatusCancelled
		}, 30*time.Second, 10*time.Millisecond)
		if i < n-1 {
			// Spaced out, so that each leave wakes the poller on its own.
			time.Sleep(300 * time.Millisecond)
			require.Zero(t, sim.Stats().BatchesCancelled, "batch cancelled after %d of %d jobs", i+1, n)
		}
	}
	require.Eventually(t, func() bool { return sim.Stats().BatchesCancelled == 1 }, 30*time.Second, 10*time.Millisecond,
		"the batch is cancelled at the provider once every job in it was cancelled")
	stats := sim.Stats()
	require.Zero(t, stats.BatchBilledCalls)
	require.Zero(t, stats.BilledCalls)
}
