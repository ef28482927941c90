package server_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
)

func createRun(t *testing.T, runs oncejobv1.RunServiceClient, key string, req *oncejobv1.CreateRunRequest) *oncejobv1.Run {
	t.Helper()
	resp, err := runs.CreateRun(as(keyAcme, key), req)
	require.NoError(t, err)
	return resp.GetRun()
}

// TestRunBatchAnswersEachItem submits 1,000 items into a run, one invalid
// and one under a key another item of the run holds with another payload:
// 998 join the run, the two are answered with their own errors, and the
// run counts 998 items. The same batch again joins nothing new and says so
// item by item.
func TestRunBatchAnswersEachItem(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st server.Store) {
		b := setup(t, setupOpts{store: st})
		runs := oncejobv1.NewRunServiceClient(b.conn)
		params, _ := structpb.NewStruct(map[string]any{"language": "en"})
		run := createRun(t, runs, "run-1", &oncejobv1.CreateRunRequest{Name: "crawl", Pipeline: "summarize", Params: params, Labels: map[string]string{"crawl": "7"}})

		items := make([]*oncejobv1.SubmitJobsItem, 1000)
		for i := range items {
			// No pipeline, params or labels: the run's defaults.
			items[i] = &oncejobv1.SubmitJobsItem{IdempotencyKey: fmt.Sprintf("item-%d", i), Request: &oncejobv1.SubmitJobRequest{
				Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: fmt.Sprintf("page %d", i)}},
			}}
		}
		items[10].Request.Document = nil                                             // invalid
		items[20].IdempotencyKey = "item-30"                                         // item 30's key...
		items[30].Request.Document.Content = &oncejobv1.Document_Text{Text: "other"} // ...with another payload
		resp, err := b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{RunId: run.GetId(), Items: items})
		require.NoError(t, err)
		created := 0
		for i, r := range resp.GetResults() {
			switch i {
			case 10:
				require.Equal(t, int32(codes.InvalidArgument), r.GetError().GetCode())
				require.Contains(t, r.GetError().GetMessage(), "items[10].request.document")
			case 30:
				require.Equal(t, int32(codes.InvalidArgument), r.GetError().GetCode(), "item 30 reuses item 20's key")
				require.Contains(t, r.GetError().GetMessage(), "already used with a different request")
			default:
				require.Nil(t, r.GetError(), "item %d", i)
				require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED, r.GetOutcome())
				require.False(t, r.GetAlreadyInRun())
				require.Equal(t, "summarize", r.GetJob().GetPipeline())
				require.Nil(t, r.GetJob().GetParams(), "a run item's answer leaves out the run's params")
				created++
			}
		}
		require.Equal(t, 998, created)
		// The job has the run's params and labels under its own.
		job, err := b.client.GetJob(as(keyAcme, ""), &oncejobv1.GetJobRequest{JobId: resp.GetResults()[0].GetJob().GetId()})
		require.NoError(t, err)
		require.Equal(t, "en", job.GetJob().GetParams().GetFields()["language"].GetStringValue())
		require.Equal(t, "7", job.GetJob().GetLabels()["crawl"])

		got, err := runs.GetRun(as(keyAcme, ""), &oncejobv1.GetRunRequest{RunId: run.GetId()})
		require.NoError(t, err)
		p := got.GetRun().GetProgress()
		require.EqualValues(t, 998, p.GetItems())
		require.EqualValues(t, 998, p.GetQueued())
		require.EqualValues(t, 998, p.GetComputed())
		require.Zero(t, p.GetReused())
		require.False(t, p.GetComplete())

		// The same call again (a resumed client): every item answered from
		// the run, nothing new.
		again, err := b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{RunId: run.GetId(), Items: items})
		require.NoError(t, err)
		for i, r := range again.GetResults() {
			if i == 10 || i == 30 {
				require.NotNil(t, r.GetError())
				continue
			}
			require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING, r.GetOutcome(), "item %d", i)
			require.True(t, r.GetAlreadyInRun())
			require.Equal(t, resp.GetResults()[i].GetJob().GetId(), r.GetJob().GetId())
		}
		got, err = runs.GetRun(as(keyAcme, ""), &oncejobv1.GetRunRequest{RunId: run.GetId()})
		require.NoError(t, err)
		require.EqualValues(t, 998, got.GetRun().GetProgress().GetItems())

		list, err := b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{RunId: run.GetId(), PageSize: 500})
		require.NoError(t, err)
		require.Len(t, list.GetJobs(), 500)
		require.NotEmpty(t, list.GetNextPageToken())
		_, err = b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{PageSize: 500, PageToken: list.GetNextPageToken()})
		requireFieldViolation(t, err, "page_token", "other filters")
	})
}

// TestRunBadInput: refusals of the whole call write nothing.
func TestRunBadInput(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st server.Store) {
		b := setup(t, setupOpts{store: st})
		runs := oncejobv1.NewRunServiceClient(b.conn)

		_, err := runs.CreateRun(as(keyAcme, ""), &oncejobv1.CreateRunRequest{Name: "x"})
		requireReason(t, err, codes.InvalidArgument, "IDEMPOTENCY_KEY_INVALID")
		_, err = runs.CreateRun(as(keyAcme, "k"), &oncejobv1.CreateRunRequest{Name: "", Pipeline: "nope"})
		requireFieldViolation(t, err, "name", "required")
		requireFieldViolation(t, err, "pipeline", "unknown pipeline")

		run := createRun(t, runs, "run-a", &oncejobv1.CreateRunRequest{Name: "a", Pipeline: "summarize"})
		replay := createRun(t, runs, "run-a", &oncejobv1.CreateRunRequest{Name: "a", Pipeline: "summarize"})
		require.Equal(t, run.GetId(), replay.GetId())
		_, err = runs.CreateRun(as(keyAcme, "run-a"), &oncejobv1.CreateRunRequest{Name: "b", Pipeline: "summarize"})
		requireReason(t, err, codes.InvalidArgument, "IDEMPOTENCY_KEY_REUSED")

		// Over the limit, with a run: refused whole, nothing joins.
		items := make([]*oncejobv1.SubmitJobsItem, 1001)
		for i := range items {
			items[i] = &oncejobv1.SubmitJobsItem{IdempotencyKey: fmt.Sprintf("k%d", i), Request: submitReq(fmt.Sprint(i))}
		}
		_, err = b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{RunId: run.GetId(), Items: items})
		requireFieldViolation(t, err, "items", "1 to 1000")
		got, err := runs.GetRun(as(keyAcme, ""), &oncejobv1.GetRunRequest{RunId: run.GetId()})
		require.NoError(t, err)
		require.Zero(t, got.GetRun().GetProgress().GetItems())
		require.Empty(t, listAll(t, b.client, keyAcme))

		// A run of another tenant does not exist; a cancelled run accepts
		// nothing.
		_, err = b.client.SubmitJobs(as(keyGlobex, ""), &oncejobv1.SubmitJobsRequest{RunId: run.GetId(), Items: items[:1]})
		require.Equal(t, codes.NotFound, status.Code(err))
		cancelled, err := runs.CancelRun(as(keyAcme, ""), &oncejobv1.CancelRunRequest{RunId: run.GetId()})
		require.NoError(t, err)
		require.Equal(t, oncejobv1.RunState_RUN_STATE_CANCELLED, cancelled.GetRun().GetState())
		_, err = b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{RunId: run.GetId(), Items: items[:1]})
		requireReason(t, err, codes.FailedPrecondition, "RUN_CANCELLED")
		require.Empty(t, listAll(t, b.client, keyAcme))

		_, err = runs.RetryRunFailures(as(keyAcme, ""), &oncejobv1.RetryRunFailuresRequest{RunId: run.GetId()})
		requireReason(t, err, codes.InvalidArgument, "IDEMPOTENCY_KEY_INVALID")
		_, err = runs.GetRun(as(keyAcme, ""), &oncejobv1.GetRunRequest{RunId: "not-a-uuid"})
		requireFieldViolation(t, err, "run_id", "UUID")
	})
}

// TestRunCompletedWhenItsLastItemEnds: a run whose items are all terminal
// is COMPLETED, with no rate and no time left - before issue 30 it stayed
// OPEN with a rate that decayed for a minute after its last item ended -
// and a new item that is not terminal makes it OPEN again. A run without
// items is OPEN.
func TestRunCompletedWhenItsLastItemEnds(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st server.Store) {
		b := setup(t, setupOpts{store: st})
		runs := oncejobv1.NewRunServiceClient(b.conn)
		run := createRun(t, runs, "run-c", &oncejobv1.CreateRunRequest{Name: "done", Pipeline: "summarize"})
		require.Equal(t, oncejobv1.RunState_RUN_STATE_OPEN, run.GetState(), "no items yet")
		submit := func(keys ...string) []string {
			items := make([]*oncejobv1.SubmitJobsItem, len(keys))
			for i, k := range keys {
				items[i] = &oncejobv1.SubmitJobsItem{IdempotencyKey: k, Request: &oncejobv1.SubmitJobRequest{
					Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "page " + k}},
				}}
			}
			resp, err := b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{RunId: run.GetId(), Items: items})
			require.NoError(t, err)
			var ids []string
			for _, r := range resp.GetResults() {
				require.Nil(t, r.GetError())
				ids = append(ids, r.GetJob().GetId())
			}
			return ids
		}
		get := func() *oncejobv1.Run {
			resp, err := runs.GetRun(as(keyAcme, ""), &oncejobv1.GetRunRequest{RunId: run.GetId()})
			require.NoError(t, err)
			return resp.GetRun()
		}
		ids := submit("a", "b")
		require.Equal(t, oncejobv1.RunState_RUN_STATE_OPEN, get().GetState())
		for _, id := range ids {
			_, err := b.client.CancelJob(as(keyAcme, ""), &oncejobv1.CancelJobRequest{JobId: id})
			require.NoError(t, err)
		}
		done := get()
		require.Equal(t, oncejobv1.RunState_RUN_STATE_COMPLETED, done.GetState())
		require.True(t, done.GetProgress().GetComplete())
		require.Zero(t, done.GetProgress().GetItemsPerSecond(), "no decaying rate")
		require.Nil(t, done.GetProgress().GetEstimatedTimeLeft())
		list, err := runs.ListRuns(as(keyAcme, ""), &oncejobv1.ListRunsRequest{})
		require.NoError(t, err)
		require.Equal(t, oncejobv1.RunState_RUN_STATE_COMPLETED, list.GetRuns()[0].GetState(), "listed as completed too")

		submit("c")
		require.Equal(t, oncejobv1.RunState_RUN_STATE_OPEN, get().GetState(), "a new item opens it again")
	})
}
