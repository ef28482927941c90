package server_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/store"
)

func TestCancelJob(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	sub, err := b.client.SubmitJob(as(keyAcme, "c1"), submitReq("cancel me"))
	require.NoError(t, err)
	id := sub.GetJob().GetId()

	// Another tenant cannot cancel it.
	_, err = b.client.CancelJob(as(keyGlobex, ""), &oncejobv1.CancelJobRequest{JobId: id})
	require.Equal(t, codes.NotFound, status.Code(err))

	resp, err := b.client.CancelJob(as(keyAcme, ""), &oncejobv1.CancelJobRequest{JobId: id, Reason: "wrong invoice"})
	require.NoError(t, err)
	require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_CANCELLED, resp.GetJob().GetStatus())
	require.NotNil(t, resp.GetJob().GetFinishTime())

	// Cancelling again is harmless.
	again, err := b.client.CancelJob(as(keyAcme, ""), &oncejobv1.CancelJobRequest{JobId: id})
	require.NoError(t, err)
	require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_CANCELLED, again.GetJob().GetStatus())

	// A cancelled job cannot be replayed: FAILED_PRECONDITION naming its status.
	_, err = b.client.ReplayJob(as(keyAcme, "r1"), &oncejobv1.ReplayJobRequest{JobId: id})
	st := status.Convert(err)
	require.Equal(t, codes.FailedPrecondition, st.Code(), st.Message())
	require.Contains(t, st.Message(), "JOB_STATUS_CANCELLED")
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	require.NotNil(t, info)
	require.Equal(t, "JOB_STATUS_CONFLICT", info.GetReason())
}

func TestReplayJobIsIdempotentByKey(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	sub, err := b.client.SubmitJob(as(keyAcme, "s"), submitReq("replay me"))
	require.NoError(t, err)
	id := sub.GetJob().GetId()
	engine := b.store.(store.EngineStore)

	// A worker claims it and dead-letters it.
	deadLetter := func() {
		jobs, err := engine.JobClaim(context.Background(), &store.JobClaimParams{Owner: "w", Limit: 10, LeaseDuration: 30e9})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		_, err = engine.JobTransition(context.Background(), &store.JobTransitionParams{
			Lease: store.Lease{JobID: id, Owner: "w", Attempt: jobs[0].Attempt}, To: store.JobStatusDeadLettered,
			Error: &store.JobError{Code: "BUDGET_SPENT", Message: "attempts spent"},
		})
		require.NoError(t, err)
	}
	deadLetter()

	// The key is required.
	_, err = b.client.ReplayJob(as(keyAcme, ""), &oncejobv1.ReplayJobRequest{JobId: id})
	requireReason(t, err, codes.InvalidArgument, "IDEMPOTENCY_KEY_INVALID")

	first, err := b.client.ReplayJob(as(keyAcme, "replay-1"), &oncejobv1.ReplayJobRequest{JobId: id, Reason: "provider fixed"})
	require.NoError(t, err)
	require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_QUEUED, first.GetJob().GetStatus())
	require.Nil(t, first.GetJob().GetError())

	deadLetter() // it fails again

	// A retry of the same request replays the answer and queues nothing.
	var header metadata.MD
	again, err := b.client.ReplayJob(as(keyAcme, "replay-1"), &oncejobv1.ReplayJobRequest{JobId: id, Reason: "provider fixed"}, grpc.Header(&header))
	require.NoError(t, err)
	require.Equal(t, []string{"true"}, header.Get("idempotent-replayed"))
	require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_DEAD_LETTERED, again.GetJob().GetStatus())

	// The same key with another request.
	_, err = b.client.ReplayJob(as(keyAcme, "replay-1"), &oncejobv1.ReplayJobRequest{JobId: id, Reason: "something else"})
	requireReason(t, err, codes.InvalidArgument, "IDEMPOTENCY_KEY_REUSED")

	// A new key replays it.
	fresh, err := b.client.ReplayJob(as(keyAcme, "replay-2"), &oncejobv1.ReplayJobRequest{JobId: id, FromStage: oncejobv1.JobStage_JOB_STAGE_LLM_DONE})
	require.NoError(t, err)
	require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_QUEUED, fresh.GetJob().GetStatus())

	_, err = b.client.ReplayJob(as(keyAcme, "replay-3"), &oncejobv1.ReplayJobRequest{JobId: id, FromStage: oncejobv1.JobStage_JOB_STAGE_PUBLISHED})
	requireFieldViolation(t, err, "from_stage", "cannot be re-run")
}

func TestResolveAndApproveNeedTheirStatus(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	sub, err := b.client.SubmitJob(as(keyAcme, "s"), submitReq("queued job"))
	require.NoError(t, err)
	id := sub.GetJob().GetId()

	_, err = b.client.ResolveJob(as(keyAcme, "k1"), &oncejobv1.ResolveJobRequest{JobId: id, Resolution: oncejobv1.Resolution_RESOLUTION_RETRY})
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	_, err = b.client.ResolveJob(as(keyAcme, "k2"), &oncejobv1.ResolveJobRequest{JobId: id})
	requireFieldViolation(t, err, "resolution", "RESOLUTION_RETRY or RESOLUTION_FAIL")
	_, err = b.client.ApproveJob(as(keyAcme, "k3"), &oncejobv1.ApproveJobRequest{JobId: id, Approve: true})
	require.Equal(t, codes.FailedPrecondition, status.Code(err))

	// A refused call stores nothing under its key: the same call is refused
	// again, not replayed as a success.
	_, err = b.client.ApproveJob(as(keyAcme, "k3"), &oncejobv1.ApproveJobRequest{JobId: id, Approve: true})
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	got, err := b.client.GetJob(as(keyAcme, ""), &oncejobv1.GetJobRequest{JobId: id})
	require.NoError(t, err)
	require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_QUEUED, got.GetJob().GetStatus())
}
