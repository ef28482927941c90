package storesqlite

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// TestJobPublishManyRollsBackAJobThatFailsAfterWriting: a job of a publish
// that fails after writing (here a checkpoint the schema refuses, after its
// fence and an earlier checkpoint with its event were written) rolls back
// alone, with nothing of it left, while the batch's other jobs publish.
func TestJobPublishManyRollsBackAJobThatFailsAfterWriting(t *testing.T) {
	t.Parallel()
	s := openSetTestStore(t)
	ctx := t.Context()
	for range 3 {
		_, err := s.JobSubmit(ctx, setSubmission(64))
		require.NoError(t, err)
	}
	jobs, err := s.JobClaim(ctx, &store.JobClaimParams{Owner: "w", Limit: 3, LeaseDuration: time.Minute})
	require.NoError(t, err)
	require.Len(t, jobs, 3)
	before, err := s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: jobs[1].Tenant, ID: jobs[1].ID})
	require.NoError(t, err)
	eventsBefore, err := s.JobEventList(ctx, &store.JobEventListParams{Tenant: jobs[1].Tenant, JobID: jobs[1].ID})
	require.NoError(t, err)

	params := &store.JobPublishManyParams{}
	for i, j := range jobs {
		p := &store.JobPublishParams{
			Lease:   store.Lease{JobID: j.ID, Owner: j.LeaseOwner, Attempt: j.Attempt},
			Output:  []byte(`{"ok":true}`),
			Message: "published",
			Checkpoints: []store.StageCheckpoint{
				{Stage: store.JobStageLLMDone, Chunk: -1, StageKey: "stage:v1:l-" + j.ID, CodeVersion: "1", Output: []byte(`{}`), AdvanceStage: true, Message: "llm_done: computed"},
			},
		}
		if i == 1 {
			p.Checkpoints = append(p.Checkpoints, store.StageCheckpoint{Stage: "no_such_stage", Chunk: -1, StageKey: "stage:v1:x", CodeVersion: "1", Output: []byte(`{}`)})
		}
		params.Jobs = append(params.Jobs, p)
	}
	res, err := s.JobPublishMany(ctx, params)
	require.NoError(t, err)
	require.Len(t, res.Items, 3)
	require.Error(t, res.Items[1].Err)
	require.NotErrorIs(t, res.Items[1].Err, store.ErrLeaseLost)
	require.Nil(t, res.Items[1].Job)
	for _, i := range []int{0, 2} {
		require.NoError(t, res.Items[i].Err)
		require.Equal(t, store.JobStatusSucceeded, res.Items[i].Job.Status)
		events, err := s.JobEventList(ctx, &store.JobEventListParams{Tenant: jobs[i].Tenant, JobID: jobs[i].ID})
		require.NoError(t, err)
		require.Len(t, events, 4, "queued, claimed, llm_done, published: each once")
	}

	after, err := s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: jobs[1].Tenant, ID: jobs[1].ID})
	require.NoError(t, err)
	require.Equal(t, before, after, "the failed job is as it was, its fence's update undone")
	eventsAfter, err := s.JobEventList(ctx, &store.JobEventListParams{Tenant: jobs[1].Tenant, JobID: jobs[1].ID})
	require.NoError(t, err)
	require.Equal(t, eventsBefore, eventsAfter)
	cps, err := s.CheckpointList(ctx, &store.CheckpointListParams{JobID: jobs[1].ID})
	require.NoError(t, err)
	require.Empty(t, cps)
}
