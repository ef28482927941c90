package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storetest"
)

func TestGetJobFullViewHasCheckpointsAndJournal(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *watchBundle) {
		ctx := context.Background()
		first := submit(t, b.client, keyAcme, "full view one")
		second := submit(t, b.client, keyAcme, "full view two")
		jobs, err := b.store.JobClaim(ctx, &store.JobClaimParams{Owner: "w", Limit: 2, LeaseDuration: time.Minute})
		require.NoError(t, err)
		require.Len(t, jobs, 2)
		byID := map[string]*store.Job{jobs[0].ID: jobs[0], jobs[1].ID: jobs[1]}

		require.NoError(t, storetest.CheckpointWrite(ctx, b.store, &storetest.CheckpointWriteParams{
			Lease: lease(byID[first]), Stage: store.JobStageTextExtracted, Chunk: -1, StageKey: "stage:v1:text",
			CodeVersion: "3", Output: []byte("twelve bytes"), AdvanceStage: true, Message: "text_extracted: computed",
		}))
		require.NoError(t, storetest.CheckpointWrite(ctx, b.store, &storetest.CheckpointWriteParams{
			Lease: lease(byID[second]), Stage: store.JobStageTextExtracted, Chunk: -1, StageKey: "stage:v1:text",
			CodeVersion: "3", Output: []byte("twelve bytes"), ReusedFrom: first, AdvanceStage: true, Message: "text_extracted: reused",
		}))
		require.NoError(t, b.store.LLMAttemptRecord(ctx, &store.LLMAttemptRecordParams{Attempt: store.LLMAttempt{
			JobID: first, JobAttempt: 1, Stage: store.JobStageLLMDone, Chunk: 0, ProviderKey: "pk-1", Model: "gpt-x",
			Outcome: store.LLMOutcomeOutcomeUnknown, Error: "client timeout after sending", LatencyMillis: 60000,
		}}))
		require.NoError(t, b.store.LLMAttemptRecord(ctx, &store.LLMAttemptRecordParams{Attempt: store.LLMAttempt{
			JobID: first, JobAttempt: 1, Stage: store.JobStageLLMDone, Chunk: 0, ProviderKey: "pk-1", Model: "gpt-x",
			Outcome: store.LLMOutcomeSucceeded, Billed: true, PromptTokens: 100, CompletionTokens: 20, CostMicros: 75,
			LatencyMillis: 900, ProviderRequestID: "req-1",
		}}))

		basic, err := b.client.GetJob(as(keyAcme, ""), &oncejobv1.GetJobRequest{JobId: first})
		require.NoError(t, err)
		require.Empty(t, basic.GetJob().GetCheckpoints(), "BASIC has no detail")
		require.Empty(t, basic.GetJob().GetLlmAttempts())

		full, err := b.client.GetJob(as(keyAcme, ""), &oncejobv1.GetJobRequest{JobId: first, View: oncejobv1.JobView_JOB_VIEW_FULL})
		require.NoError(t, err)
		cps := full.GetJob().GetCheckpoints()
		require.Len(t, cps, 1)
		require.Equal(t, oncejobv1.JobStage_JOB_STAGE_TEXT_EXTRACTED, cps[0].GetStage())
		require.Equal(t, int32(-1), cps[0].GetChunk())
		require.Equal(t, "stage:v1:text", cps[0].GetStageKey())
		require.Equal(t, "3", cps[0].GetCodeVersion())
		require.Equal(t, int32(1), cps[0].GetAttempt())
		require.Empty(t, cps[0].GetReusedFromJobId(), "computed")
		require.Equal(t, int64(12), cps[0].GetOutputSizeBytes())
		attempts := full.GetJob().GetLlmAttempts()
		require.Len(t, attempts, 2)
		require.Equal(t, oncejobv1.LlmOutcome_LLM_OUTCOME_OUTCOME_UNKNOWN, attempts[0].GetOutcome())
		require.Equal(t, "client timeout after sending", attempts[0].GetError())
		require.False(t, attempts[0].GetBilled())
		require.Equal(t, oncejobv1.LlmOutcome_LLM_OUTCOME_SUCCEEDED, attempts[1].GetOutcome())
		require.Equal(t, "gpt-x", attempts[1].GetModel())
		require.Equal(t, "pk-1", attempts[1].GetProviderKey())
		require.True(t, attempts[1].GetBilled())
		require.Equal(t, int64(75), attempts[1].GetCostMicros())
		require.Equal(t, int64(900), attempts[1].GetLatencyMs())
		require.Equal(t, "req-1", attempts[1].GetProviderRequestId())

		reused, err := b.client.GetJob(as(keyAcme, ""), &oncejobv1.GetJobRequest{JobId: second, View: oncejobv1.JobView_JOB_VIEW_FULL})
		require.NoError(t, err)
		require.Len(t, reused.GetJob().GetCheckpoints(), 1)
		require.Equal(t, first, reused.GetJob().GetCheckpoints()[0].GetReusedFromJobId())

		_, err = b.client.GetJob(as(keyGlobex, ""), &oncejobv1.GetJobRequest{JobId: first, View: oncejobv1.JobView_JOB_VIEW_FULL})
		require.Equal(t, codes.NotFound, status.Code(err), "another tenant's job, detail or not")
		_, err = b.client.GetJob(as(keyAcme, ""), &oncejobv1.GetJobRequest{JobId: first, View: 7})
		requireFieldViolation(t, err, "view", "unknown view")
	})
}

func TestCountJobsCountsTheCallersJobsPerStatus(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *watchBundle) {
		ids := []string{submit(t, b.client, keyAcme, "count a"), submit(t, b.client, keyAcme, "count b"), submit(t, b.client, keyAcme, "count c")}
		submit(t, b.client, keyGlobex, "count elsewhere")
		_, err := b.client.CancelJob(as(keyAcme, ""), &oncejobv1.CancelJobRequest{JobId: ids[0]})
		require.NoError(t, err)

		resp, err := b.client.CountJobs(as(keyAcme, ""), &oncejobv1.CountJobsRequest{})
		require.NoError(t, err)
		require.Equal(t, int64(3), resp.GetTotal())
		require.Len(t, resp.GetCounts(), 2)
		require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_QUEUED, resp.GetCounts()[0].GetStatus())
		require.Equal(t, int64(2), resp.GetCounts()[0].GetCount())
		require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_CANCELLED, resp.GetCounts()[1].GetStatus())
		require.Equal(t, int64(1), resp.GetCounts()[1].GetCount())

		other, err := b.client.CountJobs(as(keyGlobex, ""), &oncejobv1.CountJobsRequest{})
		require.NoError(t, err)
		require.Equal(t, int64(1), other.GetTotal())
		summarize, err := b.client.CountJobs(as(keyAcme, ""), &oncejobv1.CountJobsRequest{Pipeline: "summarize"})
		require.NoError(t, err)
		require.Equal(t, int64(3), summarize.GetTotal(), "filtered by the pipeline of every job")
		require.Equal(t, resp.GetCounts()[0].GetCount(), summarize.GetCounts()[0].GetCount())
		none, err := b.client.CountJobs(as(keyAcme, ""), &oncejobv1.CountJobsRequest{Pipeline: "no-such-pipeline"})
		require.NoError(t, err)
		require.Zero(t, none.GetTotal())
		require.Empty(t, none.GetCounts())
	})
}

// A list and a watch from its watch_cursor miss nothing: the first change
// the watch sends is the first one the list could not have seen.
func TestListJobsWatchCursorResumesAfterThePage(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *watchBundle) {
		before := submit(t, b.client, keyAcme, "listed")
		// Wait until the submission is readable in the change log, so it is
		// behind any head read later (Postgres holds back changes while any
		// older transaction on the server is open).
		ctx, cancel := context.WithTimeout(as(keyAcme, ""), 60*time.Second)
		defer cancel()
		all, err := b.client.WatchJobs(ctx, &oncejobv1.WatchJobsRequest{})
		require.NoError(t, err)
		c, err := all.Recv()
		require.NoError(t, err)
		require.Equal(t, before, c.GetJob().GetId())

		page, err := b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{})
		require.NoError(t, err)
		require.Len(t, page.GetJobs(), 1)
		require.NotEmpty(t, page.GetWatchCursor())

		after := submit(t, b.client, keyAcme, "not listed")
		stream, err := b.client.WatchJobs(ctx, &oncejobv1.WatchJobsRequest{AfterCursor: page.GetWatchCursor()})
		require.NoError(t, err)
		got, err := stream.Recv()
		require.NoError(t, err)
		require.Equal(t, after, got.GetJob().GetId(), "the first change after the page")
		require.Equal(t, int32(1), got.GetEvent().GetSeq())
	})
}

// Watches send their headers once established, before any event: a client
// learns the watch is open (and its request id) while nothing happens.
func TestWatchesSendHeadersOnceEstablished(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *watchBundle) {
		ctx, cancel := context.WithTimeout(as(keyAcme, ""), 60*time.Second)
		defer cancel()
		jobs, err := b.client.WatchJobs(ctx, &oncejobv1.WatchJobsRequest{Pipeline: "nothing-ever"})
		require.NoError(t, err)
		md, err := jobs.Header()
		require.NoError(t, err)
		require.Len(t, md.Get("x-request-id"), 1)
		require.Equal(t, []string{"true"}, md.Get(server.EstablishedHeader))

		id := submit(t, b.client, keyAcme, "headers")
		job, err := b.client.WatchJob(ctx, &oncejobv1.WatchJobRequest{JobId: id, AfterSeq: 1})
		require.NoError(t, err)
		md, err = job.Header()
		require.NoError(t, err)
		require.Len(t, md.Get("x-request-id"), 1)
		require.Equal(t, []string{"true"}, md.Get(server.EstablishedHeader))

		// Not established: headers without the marker, then the status.
		for _, req := range []*oncejobv1.WatchJobRequest{
			{JobId: "0190d7a8-0000-7000-8000-000000000000"}, // no such job
			{JobId: id, AfterSeq: 5},                        // past its last event
		} {
			missing, err := b.client.WatchJob(ctx, req)
			require.NoError(t, err)
			md, _ := missing.Header()
			require.Empty(t, md.Get(server.EstablishedHeader))
			_, err = missing.Recv()
			require.Error(t, err)
		}
		other, err := b.client.WatchJob(as(keyGlobex, ""), &oncejobv1.WatchJobRequest{JobId: id})
		require.NoError(t, err)
		md, _ = other.Header()
		require.Empty(t, md.Get(server.EstablishedHeader))
		_, err = other.Recv()
		require.Equal(t, codes.NotFound, status.Code(err))
	})
}
