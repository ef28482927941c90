package server_test

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"maps"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	_ "modernc.org/sqlite"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/store/storesqlite/storesqlitetest"
)

// storeWithBytes is a store and a reading of what its jobs table holds.
type storeWithBytes struct {
	store server.Store
	// columns is the bytes of the jobs' params and labels columns, as text.
	columns func(t *testing.T) int64
	// table is the bytes of the jobs table with its TOAST and indexes
	// (Postgres; 0 on SQLite, whose file is measured by columns).
	table func(t *testing.T) int64
}

// bothStoresWithBytes runs test on each store, with a reading of its jobs
// table.
func bothStoresWithBytes(t *testing.T, test func(t *testing.T, st storeWithBytes)) {
	t.Helper()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		st := storepgtest.NewTestStore(t)
		read := func(t *testing.T, query string) int64 {
			var n int64
			require.NoError(t, st.Pool().QueryRow(t.Context(), query).Scan(&n))
			return n
		}
		test(t, storeWithBytes{store: st,
			columns: func(t *testing.T) int64 {
				return read(t, `SELECT coalesce(sum(octet_length(params::text) + octet_length(labels::text)), 0)::bigint FROM jobs`)
			},
			table: func(t *testing.T) int64 { return read(t, `SELECT pg_total_relation_size('jobs')`) },
		})
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		st := storesqlitetest.Open(t, dir)
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "oncejob.db")+"?mode=ro")
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		test(t, storeWithBytes{store: st,
			columns: func(t *testing.T) int64 {
				var n int64
				require.NoError(t, db.QueryRowContext(t.Context(), `SELECT coalesce(sum(length(CAST(params AS BLOB)) + length(CAST(labels AS BLOB))), 0) FROM jobs`).Scan(&n))
				return n
			},
			table: func(*testing.T) int64 { return 0 },
		})
	})
}

// randomText is n bytes of hex that no store compresses.
func randomText(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n/2)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// TestRunDefaultsAreStoredOnce: a run's params and labels are stored once,
// on its row, not copied into each of its items' jobs (issue #31, finding
// 3: a 21,818-byte SubmitJobs created 1,000 jobs and 261 MB of rows). A
// run of ~21 KB of defaults and 1,000 items grows the jobs' params and
// labels by far less than the 21 MB the copies would take (on main: 21 MB),
// and each job reads back, over GetJob and ListJobs, with exactly the run's
// under its own, the item's winning.
func TestRunDefaultsAreStoredOnce(t *testing.T) {
	t.Parallel()
	bothStoresWithBytes(t, func(t *testing.T, st storeWithBytes) {
		b := setup(t, setupOpts{store: st.store, quiet: true})
		runs := oncejobv1.NewRunServiceClient(b.conn)
		defaults := map[string]any{}
		for i := range 5 {
			defaults[fmt.Sprintf("d%d", i)] = randomText(t, 4000)
		}
		runLabels := map[string]string{}
		for i := range 8 {
			runLabels[fmt.Sprintf("run-%d", i)] = randomText(t, 100)
		}
		params, err := structpb.NewStruct(defaults)
		require.NoError(t, err)
		run := createRun(t, runs, "stored-once", &oncejobv1.CreateRunRequest{Name: "once", Pipeline: "summarize", Params: params, Labels: runLabels})
		perItem := int64(proto.Size(params))
		for _, v := range runLabels {
			perItem += int64(len(v) + 5)
		}
		require.Greater(t, perItem, int64(20_000))

		columnsBefore, tableBefore := st.columns(t), st.table(t)
		const items, perCall = 1000, 200 // within the per-call bound of SubmitJobs into a run
		for call := range items / perCall {
			batch := make([]*oncejobv1.SubmitJobsItem, perCall)
			for j := range batch {
				i := call*perCall + j
				own, err := structpb.NewStruct(map[string]any{"page": i, "d0": fmt.Sprintf("own-%d", i)})
				require.NoError(t, err)
				batch[j] = &oncejobv1.SubmitJobsItem{IdempotencyKey: fmt.Sprintf("item-%d", i), Request: &oncejobv1.SubmitJobRequest{
					Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: fmt.Sprintf("page %d", i)}},
					Params:   own, Labels: map[string]string{"item": fmt.Sprint(i), "run-0": "own"},
				}}
			}
			resp, err := b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{RunId: run.GetId(), Items: batch})
			require.NoError(t, err)
			for _, r := range resp.GetResults() {
				require.Nil(t, r.GetError())
				require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED, r.GetOutcome())
			}
		}
		grew := st.columns(t) - columnsBefore
		t.Logf("1,000 items of a run of %d bytes of defaults: params and labels grew %d bytes (copies: %d), the jobs table %d bytes",
			perItem, grew, items*perItem, st.table(t)-tableBefore)
		require.Less(t, grew, int64(2<<20), "the run's defaults were copied into its items' rows")
		if tableBefore > 0 {
			require.Less(t, st.table(t)-tableBefore, items*perItem/2, "the jobs table grew by the copies")
		}

		want := func(i int) *oncejobv1.Job {
			merged := maps.Clone(defaults)
			merged["page"], merged["d0"] = float64(i), fmt.Sprintf("own-%d", i)
			p, err := structpb.NewStruct(merged)
			require.NoError(t, err)
			labels := maps.Clone(runLabels)
			labels["item"], labels["run-0"] = fmt.Sprint(i), "own"
			return &oncejobv1.Job{Params: p, Labels: labels}
		}
		list, err := b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{RunId: run.GetId(), PageSize: 5})
		require.NoError(t, err)
		require.Len(t, list.GetJobs(), 5)
		for _, j := range list.GetJobs() {
			var i int
			_, err := fmt.Sscanf(j.GetIdempotencyKey(), "item-%d", &i)
			require.NoError(t, err)
			got, err := b.client.GetJob(as(keyAcme, ""), &oncejobv1.GetJobRequest{JobId: j.GetId()})
			require.NoError(t, err)
			for what, job := range map[string]*oncejobv1.Job{"GetJob": got.GetJob(), "ListJobs": j} {
				require.True(t, proto.Equal(want(i).GetParams(), job.GetParams()), "%s: params of item %d", what, i)
				require.Equal(t, want(i).GetLabels(), job.GetLabels(), "%s: labels of item %d", what, i)
			}
		}
	})
}

// TestRunItemLimitsHoldAfterMerging: an item of a run is held to the
// limits with the run's params and labels merged under its own (64 of
// each), as before they were stored once: 64 after merging join, 65 are
// the item's INVALID_ARGUMENT naming its field, and a member or label the
// item shares with the run counts once.
func TestRunItemLimitsHoldAfterMerging(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st server.Store) {
		b := setup(t, setupOpts{store: st, quiet: true})
		runs := oncejobv1.NewRunServiceClient(b.conn)
		fields := func(prefix string, n int) map[string]any {
			out := map[string]any{}
			for i := range n {
				out[fmt.Sprintf("%s%d", prefix, i)] = "v"
			}
			return out
		}
		labels := func(prefix string, n int) map[string]string {
			out := map[string]string{}
			for i := range n {
				out[fmt.Sprintf("%s%d", prefix, i)] = "v"
			}
			return out
		}
		params, err := structpb.NewStruct(fields("run", 40))
		require.NoError(t, err)
		run := createRun(t, runs, "limits", &oncejobv1.CreateRunRequest{Name: "limits", Pipeline: "summarize", Params: params, Labels: labels("run", 40)})
		item := func(key string, ownParams map[string]any, ownLabels map[string]string) *oncejobv1.SubmitJobsItem {
			p, err := structpb.NewStruct(ownParams)
			require.NoError(t, err)
			return &oncejobv1.SubmitJobsItem{IdempotencyKey: key, Request: &oncejobv1.SubmitJobRequest{
				Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: key}}, Params: p, Labels: ownLabels,
			}}
		}
		shared := fields("item", 24)
		shared["run0"] = "own" // the run's member, counted once
		resp, err := b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{RunId: run.GetId(), Items: []*oncejobv1.SubmitJobsItem{
			item("at-64", shared, labels("item", 24)),
			item("params-65", fields("item", 25), nil),
			item("labels-65", nil, labels("item", 25)),
		}})
		require.NoError(t, err)
		res := resp.GetResults()
		require.Nil(t, res[0].GetError())
		requireFieldViolation(t, status.ErrorProto(res[1].GetError()), "items[1].request.params", "64")
		requireFieldViolation(t, status.ErrorProto(res[2].GetError()), "items[2].request.labels", "64")
		got, err := b.client.GetJob(as(keyAcme, ""), &oncejobv1.GetJobRequest{JobId: res[0].GetJob().GetId()})
		require.NoError(t, err)
		require.Len(t, got.GetJob().GetParams().GetFields(), 64)
		require.Equal(t, "own", got.GetJob().GetParams().GetFields()["run0"].GetStringValue())
		require.Len(t, got.GetJob().GetLabels(), 64)
	})
}
