package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/store/storesqlite/storesqlitetest"
)

// bothStores runs test against a Postgres store and an embedded one.
func bothStores(t *testing.T, test func(t *testing.T, st server.Store)) {
	t.Helper()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		test(t, storepgtest.NewTestStore(t))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		test(t, storesqlitetest.NewTestStore(t))
	})
}

// batchRecorder is a store whose JobSubmitMany calls are counted.
type batchRecorder struct {
	server.Store
	mu    sync.Mutex
	sizes []int
}

func (r *batchRecorder) JobSubmitMany(ctx context.Context, p *store.JobSubmitManyParams) (*store.JobSubmitManyResult, error) {
	r.mu.Lock()
	r.sizes = append(r.sizes, len(p.Jobs))
	r.mu.Unlock()
	return r.Store.JobSubmitMany(ctx, p)
}

func (r *batchRecorder) batches() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.sizes...)
}

// TestSubmitJobGroupCommitAnswersEachCaller sends, at once, new keys, two
// requests under one new key, a replay of an existing key and an invalid
// request. The new-key calls are written in one store call (the group is
// written when full; its linger is longer than the test); the replay is
// answered from its read and never joins it, the invalid request is refused
// before it; each caller gets its own answer.
func TestSubmitJobGroupCommitAnswersEachCaller(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st server.Store) {
		rec := &batchRecorder{Store: st}
		const fresh = 5
		b := setup(t, setupOpts{store: rec, submitLinger: time.Hour, submitMaxBatch: fresh + 2})

		// SubmitJobs writes without the group commit, under SubmitJob's
		// key scope: the replay below is of this submission.
		created, err := b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{Items: []*oncejobv1.SubmitJobsItem{
			{IdempotencyKey: "existing", Request: submitReq("existing")},
		}})
		require.NoError(t, err)
		existing := created.GetResults()[0]
		require.Nil(t, existing.GetError())
		require.Equal(t, []int{1}, rec.batches())

		type answer struct {
			resp   *oncejobv1.SubmitJobResponse
			err    error
			header metadata.MD
		}
		calls := map[string]func() answer{}
		call := func(key string, req *oncejobv1.SubmitJobRequest) func() answer {
			return func() answer {
				var h metadata.MD
				resp, err := b.client.SubmitJob(as(keyAcme, key), req, grpc.Header(&h))
				return answer{resp, err, h}
			}
		}
		for i := range fresh {
			calls[fmt.Sprintf("fresh-%d", i)] = call(fmt.Sprintf("fresh-%d", i), submitReq(fmt.Sprintf("document %d", i)))
		}
		calls["shared-a"] = call("shared", submitReq("one request"))
		calls["shared-b"] = call("shared", submitReq("another request"))
		calls["replay"] = call("existing", submitReq("existing"))
		invalid := submitReq("no pipeline")
		invalid.Pipeline = "nope"
		calls["invalid"] = call("invalid", invalid)

		answers := make(map[string]answer)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for name, c := range calls {
			wg.Go(func() {
				a := c()
				mu.Lock()
				answers[name] = a
				mu.Unlock()
			})
		}
		wg.Wait()

		require.Equal(t, []int{1, fresh + 2}, rec.batches(), "one store call for the new keys, none for the replay or the invalid request")
		for i := range fresh {
			a := answers[fmt.Sprintf("fresh-%d", i)]
			require.NoError(t, a.err)
			require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED, a.resp.GetOutcome())
			require.Empty(t, a.header.Get("idempotent-replayed"))
		}
		a, bb := answers["shared-a"], answers["shared-b"]
		if a.err != nil {
			a, bb = bb, a
		}
		require.NoError(t, a.err)
		require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED, a.resp.GetOutcome())
		requireReason(t, bb.err, codes.InvalidArgument, "IDEMPOTENCY_KEY_REUSED")

		r := answers["replay"]
		require.NoError(t, r.err)
		require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING, r.resp.GetOutcome())
		require.Equal(t, existing.GetJob().GetId(), r.resp.GetJob().GetId())
		require.Equal(t, []string{"true"}, r.header.Get("idempotent-replayed"))

		requireFieldViolation(t, answers["invalid"].err, "pipeline", "unknown pipeline")
		require.Len(t, listAll(t, b.client, keyAcme), 1+fresh+1)
	})
}

// TestSubmitJobRacingKeysGetOneJobPerKey races many callers over a few
// keys through the group commit (default linger): one job per key, every
// caller of a key answered with it, exactly one CREATED each.
func TestSubmitJobRacingKeysGetOneJobPerKey(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st server.Store) {
		b := setup(t, setupOpts{store: st})
		const keys, callersPerKey = 8, 12
		type answer struct {
			key     int
			id      string
			outcome oncejobv1.SubmitOutcome
		}
		answers := make(chan answer, keys*callersPerKey)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for k := range keys {
			for range callersPerKey {
				wg.Go(func() {
					<-start
					resp, err := b.client.SubmitJob(as(keyAcme, fmt.Sprintf("race-%d", k)), submitReq(fmt.Sprintf("document %d", k)))
					if err != nil {
						t.Errorf("key %d: %v", k, err)
						return
					}
					answers <- answer{k, resp.GetJob().GetId(), resp.GetOutcome()}
				})
			}
		}
		close(start)
		wg.Wait()
		close(answers)

		jobOf := make(map[int]string)
		created := make(map[int]int)
		n := 0
		for a := range answers {
			n++
			if id, ok := jobOf[a.key]; ok {
				require.Equal(t, id, a.id, "key %d answered with two jobs", a.key)
			}
			jobOf[a.key] = a.id
			if a.outcome == oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED {
				created[a.key]++
			} else {
				require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING, a.outcome)
			}
		}
		require.Equal(t, keys*callersPerKey, n)
		for k := range keys {
			require.Equal(t, 1, created[k], "key %d", k)
		}
		require.Len(t, listAll(t, b.client, keyAcme), keys)
	})
}

// submitJobsBatch is n items with keys prefix-0..n-1, each its own document.
func submitJobsBatch(prefix string, n int) *oncejobv1.SubmitJobsRequest {
	req := &oncejobv1.SubmitJobsRequest{}
	for i := range n {
		req.Items = append(req.Items, &oncejobv1.SubmitJobsItem{
			IdempotencyKey: fmt.Sprintf("%s-%d", prefix, i),
			Request:        submitReq(fmt.Sprintf("%s document %d", prefix, i)),
		})
	}
	return req
}

// TestSubmitJobsAnswersEachItem submits 1,000 items, one invalid and one
// whose key a SubmitJob call took with another request: 998 created and the
// two answered with their own errors; the same call again: 998 EXISTING and
// the same two errors, nothing written.
func TestSubmitJobsAnswersEachItem(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st server.Store) {
		b := setup(t, setupOpts{store: st})
		taken, err := b.client.SubmitJob(as(keyAcme, "batch-7"), submitReq("another payload"))
		require.NoError(t, err)

		req := submitJobsBatch("batch", 1000)
		const invalid, reused = 500, 7 // batch-7 is the key taken above
		req.Items[invalid].Request.Document = nil

		check := func(resp *oncejobv1.SubmitJobsResponse, want oncejobv1.SubmitOutcome) map[string]string {
			t.Helper()
			require.Len(t, resp.GetResults(), 1000)
			ids := make(map[string]string)
			for i, r := range resp.GetResults() {
				switch i {
				case invalid:
					require.Nil(t, r.GetJob())
					requireFieldViolation(t, status.ErrorProto(r.GetError()), "items[500].request.document", "is required")
				case reused:
					require.Nil(t, r.GetJob())
					requireReason(t, status.ErrorProto(r.GetError()), codes.InvalidArgument, "IDEMPOTENCY_KEY_REUSED")
					requireErrorInfoMetadata(t, r.GetError(), "field", "items[7].idempotency_key")
				default:
					require.Nil(t, r.GetError(), "item %d", i)
					require.Equal(t, want, r.GetOutcome(), "item %d", i)
					require.Equal(t, req.Items[i].GetIdempotencyKey(), r.GetJob().GetIdempotencyKey())
					ids[r.GetJob().GetId()] = req.Items[i].GetIdempotencyKey()
				}
			}
			require.Len(t, ids, 998)
			return ids
		}

		first, err := b.client.SubmitJobs(as(keyAcme, ""), req)
		require.NoError(t, err)
		created := check(first, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED)
		require.Len(t, listAllPages(t, b.client, keyAcme), 999)

		again, err := b.client.SubmitJobs(as(keyAcme, ""), req)
		require.NoError(t, err)
		require.Equal(t, created, check(again, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING))
		require.Len(t, listAllPages(t, b.client, keyAcme), 999)

		// An item's key is SubmitJob's: the same intent either way.
		var header metadata.MD
		replay, err := b.client.SubmitJob(as(keyAcme, "batch-3"), submitReq("batch document 3"), grpc.Header(&header))
		require.NoError(t, err)
		require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING, replay.GetOutcome())
		require.Equal(t, first.GetResults()[3].GetJob().GetId(), replay.GetJob().GetId())
		require.NotEqual(t, taken.GetJob().GetId(), replay.GetJob().GetId())

		// Another tenant's items are its own.
		other, err := b.client.SubmitJobs(as(keyGlobex, ""), submitJobsBatch("batch", 3))
		require.NoError(t, err)
		for _, r := range other.GetResults() {
			require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED, r.GetOutcome())
		}
	})
}

// TestSubmitJobsRefusesABatchOutsideTheLimits checks that an empty call and
// one over 1,000 items are INVALID_ARGUMENT and write nothing.
func TestSubmitJobsRefusesABatchOutsideTheLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	_, err := b.client.SubmitJobs(as(keyAcme, ""), submitJobsBatch("over", 1001))
	requireFieldViolation(t, err, "items", "1 to 1000 items, not 1001")
	_, err = b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{})
	requireFieldViolation(t, err, "items", "not 0")
	require.Empty(t, listAll(t, b.client, keyAcme))

	// Items without a key or a request are answered alone.
	resp, err := b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{Items: []*oncejobv1.SubmitJobsItem{
		{Request: submitReq("no key")},
		{IdempotencyKey: "no-request"},
		{IdempotencyKey: "fine", Request: submitReq("fine")},
	}})
	require.NoError(t, err)
	requireFieldViolation(t, status.ErrorProto(resp.GetResults()[0].GetError()), "items[0].idempotency_key", "1-255")
	requireFieldViolation(t, status.ErrorProto(resp.GetResults()[1].GetError()), "items[1].request", "is required")
	require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED, resp.GetResults()[2].GetOutcome())
	require.Len(t, listAll(t, b.client, keyAcme), 1)
}

func requireErrorInfoMetadata(t *testing.T, st *spb.Status, key, value string) {
	t.Helper()
	for _, d := range status.FromProto(st).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			require.Equal(t, value, info.GetMetadata()[key])
			return
		}
	}
	t.Fatalf("no ErrorInfo in %v", st)
}

// listAllPages lists every job of the tenant.
func listAllPages(t *testing.T, client oncejobv1.JobServiceClient, apiKey string) []*oncejobv1.Job {
	t.Helper()
	var jobs []*oncejobv1.Job
	token := ""
	for {
		resp, err := client.ListJobs(as(apiKey, ""), &oncejobv1.ListJobsRequest{PageSize: 500, PageToken: token})
		require.NoError(t, err)
		jobs = append(jobs, resp.GetJobs()...)
		if token = resp.GetNextPageToken(); token == "" {
			return jobs
		}
	}
}
