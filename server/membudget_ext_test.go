package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/server/membudget"
)

// maximalSubmit is a SubmitJob request as large as the rules allow beside
// its document: 256 KiB of params and 64 labels of the longest values.
func maximalSubmit(t *testing.T, text string) *oncejobv1.SubmitJobRequest {
	t.Helper()
	req := submitReq(text)
	fields := map[string]any{}
	for i := range 4 {
		fields[fmt.Sprintf("p%d", i)] = strings.Repeat(string(rune('a'+i)), 63<<10)
	}
	var err error
	req.Params, err = structpb.NewStruct(fields)
	require.NoError(t, err)
	req.Labels = map[string]string{}
	for i := range 64 {
		req.Labels[fmt.Sprintf("label-%02d", i)] = strings.Repeat("v", 255)
	}
	return req
}

// TestListJobsPagesOfMaximalJobsFitADefaultClient: a default page of the
// largest jobs the rules allow stays under the 4 MiB a default gRPC client
// receives, and the next page token goes on where it stopped (issue #31,
// finding 8: 17 such jobs made a default page over 4 MiB, and `oncejob
// list` failed after 6 retries). On main the first ListJobs fails with
// RESOURCE_EXHAUSTED (received message larger than max).
func TestListJobsPagesOfMaximalJobsFitADefaultClient(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{quiet: true})
	const jobs = 17
	var ids []string
	for i := range jobs {
		resp, err := b.client.SubmitJob(as(keyAcme, fmt.Sprintf("max-%d", i)), maximalSubmit(t, fmt.Sprintf("maximal %d", i)))
		require.NoError(t, err)
		ids = append([]string{resp.GetJob().GetId()}, ids...)
	}
	var seen []string
	token := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, jobs, "pagination does not end")
		page, err := b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{PageToken: token})
		require.NoError(t, err)
		require.NotEmpty(t, page.GetJobs())
		for _, j := range page.GetJobs() {
			seen = append(seen, j.GetId())
			require.Len(t, j.GetParams().GetFields(), 4, "a page carries whole jobs")
		}
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	require.Equal(t, ids, seen)
}

// TestListJobsOverTheMemoryBudgetIsRefusedWithAStatus: a page the budget
// cannot hold is RESOURCE_EXHAUSTED MEMORY_BUDGET, to retry, not an OOM.
func TestListJobsOverTheMemoryBudgetIsRefusedWithAStatus(t *testing.T) {
	t.Parallel()
	budget := membudget.New(1 << 20)
	b := setup(t, setupOpts{quiet: true, memory: budget})
	_, err := b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{})
	requireReason(t, err, codes.ResourceExhausted, membudget.ReasonMemoryBudget)
	require.Zero(t, budget.Used())
}

// TestRunAmplificationIsBounded: a small SubmitJobs into a run whose
// params and labels are large cannot make the server copy them into a
// thousand jobs and answer with all the copies (issue #31, finding 3: a
// 21,818-byte call created 1,000 jobs of 261 KB, answered 261 MB, and a
// default client was told RESOURCE_EXHAUSTED, retryable, although the jobs
// were created). Over the bound the call is INVALID_ARGUMENT with nothing
// written; within it the default client gets its answer. On main the first
// call creates the jobs and fails with RESOURCE_EXHAUSTED.
func TestRunAmplificationIsBounded(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st server.Store) {
		b := setup(t, setupOpts{store: st, quiet: true})
		runs := oncejobv1.NewRunServiceClient(b.conn)
		big := maximalSubmit(t, "run defaults")
		run := createRun(t, runs, "amplified", &oncejobv1.CreateRunRequest{Name: "amplified", Pipeline: "summarize", Params: big.GetParams(), Labels: big.GetLabels()})
		items := func(n int) []*oncejobv1.SubmitJobsItem {
			out := make([]*oncejobv1.SubmitJobsItem, n)
			for i := range out {
				out[i] = &oncejobv1.SubmitJobsItem{IdempotencyKey: fmt.Sprintf("amp-%d", i), Request: &oncejobv1.SubmitJobRequest{
					Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: fmt.Sprintf("p%d", i)}},
				}}
			}
			return out
		}
		_, err := b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{RunId: run.GetId(), Items: items(1000)})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		require.Contains(t, status.Convert(err).Message(), "items per call")
		list, err := b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{RunId: run.GetId()})
		require.NoError(t, err)
		require.Empty(t, list.GetJobs(), "a refused call wrote jobs")

		resp, err := b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{RunId: run.GetId(), Items: items(25)})
		require.NoError(t, err, "a default client cannot take the answer")
		require.Len(t, resp.GetResults(), 25)
		for _, r := range resp.GetResults() {
			require.Nil(t, r.GetError())
			require.Nil(t, r.GetJob().GetParams(), "the run's params copied into the answer")
		}
		require.Less(t, proto.Size(resp), 1<<20)
		got, err := b.client.GetJob(as(keyAcme, ""), &oncejobv1.GetJobRequest{JobId: resp.GetResults()[0].GetJob().GetId()})
		require.NoError(t, err)
		require.Len(t, got.GetJob().GetParams().GetFields(), 4, "GetJob has the run's params")
	})
}
