package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
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
