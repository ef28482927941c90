package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// slowBatchStore answers every write of a batch after delay, or the
// context's error if it ends first.
type slowBatchStore struct{ delay time.Duration }

func (s slowBatchStore) CheckpointWriteBatch(ctx context.Context, p *store.CheckpointWriteBatchParams) (*store.CheckpointWriteBatchResult, error) {
	select {
	case <-time.After(s.delay):
		return &store.CheckpointWriteBatchResult{Errs: make([]error, len(p.Writes))}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A batch's write runs as long as its newest job's timeout allows: a job
// handed over just now is not failed because an older one of its batch
// has almost no time left (a store back from a stall answers the batch
// after the older job's deadline, before the newer one's).
func TestCheckpointBatchKeepsTheNewestJobsTimeout(t *testing.T) {
	t.Parallel()
	w := &checkpointWriter{store: slowBatchStore{delay: 300 * time.Millisecond}}
	now := time.Now()
	old := &writeCall{params: &store.CheckpointWriteManyParams{}, deadline: now.Add(50 * time.Millisecond), done: make(chan struct{})}
	fresh := &writeCall{params: &store.CheckpointWriteManyParams{}, deadline: now.Add(time.Minute), done: make(chan struct{})}
	w.writeBatch([]*writeCall{old, fresh})
	<-old.done
	<-fresh.done
	require.NoError(t, fresh.err, "the fresh job had a minute")
	require.NoError(t, old.err, "the batch committed: its older job is told so, late")
}

// A job whose deadline passed while it waited is answered so, unwritten;
// the others of its batch are written.
func TestCheckpointBatchAnswersAnExpiredJobUnwritten(t *testing.T) {
	t.Parallel()
	var written int
	w := &checkpointWriter{store: countingBatchStore{n: &written}}
	now := time.Now()
	expired := &writeCall{params: &store.CheckpointWriteManyParams{}, deadline: now.Add(-time.Millisecond), done: make(chan struct{})}
	live := &writeCall{params: &store.CheckpointWriteManyParams{}, deadline: now.Add(time.Minute), done: make(chan struct{})}
	w.writeBatch([]*writeCall{expired, live})
	<-expired.done
	<-live.done
	require.True(t, errors.Is(expired.err, context.DeadlineExceeded), "%v", expired.err)
	require.NoError(t, live.err)
	require.Equal(t, 1, written, "only the live job's write reached the store")
}

type countingBatchStore struct{ n *int }

func (s countingBatchStore) CheckpointWriteBatch(_ context.Context, p *store.CheckpointWriteBatchParams) (*store.CheckpointWriteBatchResult, error) {
	*s.n += len(p.Writes)
	return &store.CheckpointWriteBatchResult{Errs: make([]error, len(p.Writes))}, nil
}
