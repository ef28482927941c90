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
	"github.com/oncejob/oncejob/worker"
)

// batchSentThenStopped submits n jobs on a provider_batch profile, runs a
// worker until their one batch is created at the simulator and stops it:
// the jobs are back in the queue (queued or retry_wait), each with an
// intent naming the batch.
func batchSentThenStopped(t *testing.T, n int) (*testBundle, *pipeline.Registry, llm.Provider, []*store.Job) {
	t.Helper()
	sim, err := llmsim.Start("", llmsim.Config{BatchDelay: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	b := &testBundle{store: storepgtest.NewTestStore(t), sim: sim}
	reg, err := pipeline.Parse([]byte("model_profiles:\n  default: {model: sim-1, prompt_micros_per_1k: 100, completion_micros_per_1k: 200, provider_batch: {max_calls: " +
		string(rune('0'+n)) + ", linger: 30s}}\npipelines:\n" + summarize(1, "1", summarizeSchema, "")))
	require.NoError(t, err)
	jobs := make([]*store.Job, n)
	for i := range jobs {
		jobs[i] = submitOnProfile(t, b.store, reg, "default", "Quarterly report "+string(rune('A'+i))+". Revenue grew.")
	}
	provider, err := llm.NewOpenAI(llm.Config{BaseURL: sim.URL, Timeout: 10 * time.Second, Batches: true})
	require.NoError(t, err)
	_, stop := b.runWorkerOn(t, reg, provider)
	// Created and recorded (the record is what the next worker's sweep
	// finds; a batch whose create answer the stop cut off has none).
	require.Eventually(t, func() bool {
		recorded, err := b.store.ProviderBatchListStale(context.Background(), &store.ProviderBatchListStaleParams{StaleBefore: time.Now().Add(time.Hour), Limit: 10})
		require.NoError(t, err)
		return len(recorded) == 1
	}, 30*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 1, sim.Stats().BatchesCreated)
	stop()
	for _, job := range jobs {
		got, err := b.store.JobGetByID(context.Background(), &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
		require.NoError(t, err)
		require.Contains(t, []store.JobStatus{store.JobStatusQueued, store.JobStatusRetryWait}, got.Status, "a job interrupted by the shutdown is queued again")
	}
	return b, reg, provider, jobs
}

// cancelQueued cancels jobs no worker holds: each is cancelled at once,
// never claimed again.
func cancelQueued(t *testing.T, st worker.Store, jobs ...*store.Job) {
	t.Helper()
	for _, job := range jobs {
		_, err := st.(store.OperatorStore).JobCancel(context.Background(), &store.JobCancelParams{Tenant: job.Tenant, ID: job.ID, Message: "test"})
		require.NoError(t, err)
		got, err := st.JobGetByID(context.Background(), &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
		require.NoError(t, err)
		require.Equal(t, store.JobStatusCancelled, got.Status)
	}
}

// TestBatchCancelledAfterRestartWhenItsJobsWereCancelledWhileQueued: a
// provider batch created, the worker stopped, every job of the batch
// cancelled while queued: no job waits on the batch again, yet the next
// worker (its sweep adopts the batch nobody follows) cancels it at the
// provider, and no line is billed. The batch's cancel used to count only
// the jobs that left it while waiting on it, so it was never cancelled
// (docs/architecture.md, "Provider batches").
func TestBatchCancelledAfterRestartWhenItsJobsWereCancelledWhileQueued(t *testing.T) {
	t.Parallel()
	const n = 3
	b, reg, provider, jobs := batchSentThenStopped(t, n)
	cancelQueued(t, b.store, jobs...)

	w, _ := b.runWorkerWith(t, reg, provider, func(c *worker.Config) { c.ProviderBatchSweep = 50 * time.Millisecond })
	read, err := w.TestSignals().BatchJobsRead.Wait()
	require.NoError(t, err)
	require.NoError(t, read.Err)
	require.Equal(t, n, read.Jobs)
	require.True(t, read.AllCancelled, "every job of the batch is cancelled in the store")
	tag, err := w.TestSignals().BatchCancelled.Wait()
	require.NoError(t, err)
	require.Equal(t, read.Tag, tag)
	stats := b.sim.Stats()
	require.EqualValues(t, 1, stats.BatchesCancelled, "the batch is cancelled at the provider")
	require.EqualValues(t, 1, stats.BatchesCreated)
	require.Zero(t, stats.BatchBilledCalls)
	require.Zero(t, stats.BilledCalls)
}

// TestBatchNotCancelledAfterRestartWhileOneJobIsNot: as above, but one job
// of the batch is not cancelled: another worker holds it. The batch is
// kept: each read of its jobs finds one not cancelled, and the provider is
// never asked to cancel it.
func TestBatchNotCancelledAfterRestartWhileOneJobIsNot(t *testing.T) {
	t.Parallel()
	const n = 3
	b, reg, provider, jobs := batchSentThenStopped(t, n)
	cancelQueued(t, b.store, jobs[:n-1]...)
	// The last job is claimed by a worker elsewhere, for longer than the
	// test: it runs, not cancelled, and does not wait on the batch here.
	// (Claimed as of a minute ahead: the shutdown's requeue may have set a
	// next try.)
	ahead := time.Now().Add(time.Minute)
	claimed, err := b.store.JobClaim(context.Background(), &store.JobClaimParams{Owner: "elsewhere", Limit: 10, LeaseDuration: time.Hour, Now: &ahead})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	require.Equal(t, jobs[n-1].ID, claimed[0].ID)

	w, _ := b.runWorkerWith(t, reg, provider, func(c *worker.Config) { c.ProviderBatchSweep = 50 * time.Millisecond })
	for range 3 { // the adopted batch's first polls
		read, err := w.TestSignals().BatchJobsRead.Wait()
		require.NoError(t, err)
		require.NoError(t, read.Err)
		require.Equal(t, n, read.Jobs)
		require.False(t, read.AllCancelled, "one job of the batch runs")
	}
	stats := b.sim.Stats()
	require.Zero(t, stats.BatchesCancelled, "a batch with a line of a job not cancelled is kept")
	require.EqualValues(t, 1, stats.BatchesCreated)
}
