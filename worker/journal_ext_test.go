package worker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/worker"
)

// failFirstJournal fails the first CheckpointWriteMany that journals an LLM
// attempt, as a write that timed out waiting for a connection does: nothing
// of it is written.
type failFirstJournal struct {
	worker.Store
	failed atomic.Bool
}

func (s *failFirstJournal) CheckpointWriteMany(ctx context.Context, arg *store.CheckpointWriteManyParams) error {
	if arg.Attempt != nil && s.failed.CompareAndSwap(false, true) {
		return errors.New("test: journal write timed out")
	}
	return s.Store.CheckpointWriteMany(ctx, arg)
}

// A call whose journal write failed is not checkpointed by the attempt's
// settling write: the next attempt asks the provider again (answered from its
// idempotency store, not billed twice) and the bill is counted once. Before,
// the settling write checkpointed the call's output without its journal row,
// and the job succeeded with its bill never counted.
func TestFailedJournalWriteLeavesTheCallUncheckpointed(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{})
	wrapped := &failFirstJournal{Store: b.store}
	b.store = wrapped
	reg := registry(t, summarize(1, "1", summarizeSchema, "    retry: {initial_backoff: 1ms, max_backoff: 5ms}\n"))
	job := submit(t, b.store, reg, "acme", "The journal write of this call fails once.")
	b.startWorker(t, reg, 0)

	got := waitTerminal(t, b.store, job)
	require.True(t, wrapped.failed.Load(), "the journal write was failed")
	require.Equal(t, store.JobStatusSucceeded, got.Status, "error: %+v", got.Error)
	require.GreaterOrEqual(t, got.Attempt, int32(2), "the job was taken over after its lease")
	require.EqualValues(t, 1, got.Usage.LLMCalls, "the provider's one bill is counted")
	journal, err := b.store.LLMAttemptList(context.Background(), &store.LLMAttemptListParams{JobID: job.ID})
	require.NoError(t, err)
	require.Len(t, journal, 1)
	require.True(t, journal[0].Billed)
	require.EqualValues(t, 1, b.sim.Stats().BilledCalls, "the second call is answered from the provider's idempotency store")
}
