package storepg_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// The writes of a CheckpointWriteBatch commit in one pipeline, a lost lease
// among them refused alone; a pipeline that fails as a whole (staged with
// a checkpoint the table refuses) goes write by write, each answered on
// its own, so the other writes commit.
func TestCheckpointWriteBatchPipelines(t *testing.T) {
	t.Parallel()
	s := storepgtest.NewTestStore(t)
	s.TestSignals().CheckpointBatch.Init()
	ctx := t.Context()
	for range 3 {
		res, err := s.JobSubmitMany(ctx, &store.JobSubmitManyParams{Jobs: []*store.JobSubmitParams{newWriteSetSubmission("tenant-a")}})
		require.NoError(t, err)
		require.NoError(t, res.Items[0].Err)
	}
	jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Owner: "w", Limit: 3, LeaseDuration: time.Minute})
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	lease := func(j *store.Job) store.Lease {
		return store.Lease{JobID: j.ID, Owner: j.LeaseOwner, Attempt: j.Attempt}
	}
	cp := func(key string) []store.StageCheckpoint {
		return []store.StageCheckpoint{{Stage: store.JobStageLLMDone, Chunk: 0, StageKey: key, CodeVersion: "1", Output: []byte(`{}`)}}
	}
	res, err := s.CheckpointWriteBatch(ctx, &store.CheckpointWriteBatchParams{Writes: []*store.CheckpointWriteManyParams{
		{Lease: lease(jobs[0]), Checkpoints: cp("k0")},
		{Lease: lease(jobs[1]), Checkpoints: cp("k1"), Stage: store.JobStageChunksReady},
		{Lease: store.Lease{JobID: jobs[2].ID, Owner: "thief", Attempt: jobs[2].Attempt}, Checkpoints: cp("k2")},
	}})
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil, store.ErrLeaseLost}, res.Errs)
	n, err := s.TestSignals().CheckpointBatch.Wait()
	require.NoError(t, err)
	require.Equal(t, 3, n, "one pipeline")

	// A checkpoint the table refuses (an unknown stage) fails the pipeline;
	// the writes then go one by one and only that one fails.
	res, err = s.CheckpointWriteBatch(ctx, &store.CheckpointWriteBatchParams{Writes: []*store.CheckpointWriteManyParams{
		{Lease: lease(jobs[0]), Checkpoints: cp("k0b")},
		{Lease: lease(jobs[1]), Checkpoints: []store.StageCheckpoint{{Stage: "no-such-stage", Chunk: 0, StageKey: "kx", CodeVersion: "1", Output: []byte(`{}`)}}},
	}})
	require.NoError(t, err)
	require.NoError(t, res.Errs[0])
	require.Error(t, res.Errs[1])
	n, err = s.TestSignals().CheckpointBatch.Wait()
	require.NoError(t, err)
	require.Equal(t, -2, n, "write by write")
	cps, err := s.CheckpointList(ctx, &store.CheckpointListParams{JobID: jobs[0].ID})
	require.NoError(t, err)
	require.Len(t, cps, 1)
	require.Equal(t, "k0b", cps[0].StageKey)
}
