package rowmap_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
)

// Stand-ins for a store's sqlc types: the params and rows Reads builds and
// reads.
type (
	docParams      struct{ Tenant, Sha256 string }
	stageKeyParams struct{ Tenant, StageKey string }
	dedupParams    struct{ Tenant, DedupKey string }
	keyParams      struct{ Tenant, Method, IdempotencyKey string }
	keyRow         struct {
		Fingerprint string
		Job         string
	}
	runParams  struct{ Tenant, ID string }
	listParams struct {
		Tenant         string
		IncludeRevoked bool
		Max            int64
	}
	eventParams struct {
		Tenant   string
		JobID    string
		AfterSeq int64
		Max      int64
	}
	existsParams struct{ Tenant, ID string }
)

// queries answers every query with fail when set, and records the queries
// it ran and the arguments they got; JobEventList answers events, and
// JobExists exists, each recording the handle it ran on.
type queries struct {
	fail   error
	ran    []string
	args   []any
	events []int64
	exists bool
	dbs    []string
}

func (q *queries) run(name string, arg any) error {
	q.ran = append(q.ran, name)
	q.args = append(q.args, arg)
	return q.fail
}

func (q *queries) DocumentGet(_ context.Context, _ string, arg docParams) ([]byte, error) {
	return []byte("doc"), q.run("DocumentGet", arg)
}

func (q *queries) CheckpointList(_ context.Context, _ string, jobID string) ([]string, error) {
	return []string{"a", "b"}, q.run("CheckpointList", jobID)
}

func (q *queries) CheckpointGetByStageKey(_ context.Context, _ string, arg stageKeyParams) (string, error) {
	return "a", q.run("CheckpointGetByStageKey", arg)
}

func (q *queries) LLMAttemptList(_ context.Context, _ string, jobID string) ([]int64, error) {
	return []int64{7}, q.run("LLMAttemptList", jobID)
}

func (q *queries) JobComputedSuccessGet(_ context.Context, _ string, arg dedupParams) (string, error) {
	return "job", q.run("JobComputedSuccessGet", arg)
}

func (q *queries) JobGetByIdempotencyKey(_ context.Context, _ string, arg keyParams) (keyRow, error) {
	return keyRow{Fingerprint: "fp", Job: "job"}, q.run("JobGetByIdempotencyKey", arg)
}

func (q *queries) RunGetByID(_ context.Context, _ string, arg runParams) (string, error) {
	return "run", q.run("RunGetByID", arg)
}

func (q *queries) JobEventList(_ context.Context, db string, arg eventParams) ([]int64, error) {
	q.dbs = append(q.dbs, db)
	return q.events, q.run("JobEventList", arg)
}

func (q *queries) JobExists(_ context.Context, db string, arg existsParams) (bool, error) {
	q.dbs = append(q.dbs, db)
	return q.exists, q.run("JobExists", arg)
}

func (q *queries) SinkStateList(_ context.Context, _ string, tenant string) ([]string, error) {
	return []string{"s1"}, q.run("SinkStateList", tenant)
}

func (q *queries) APIKeyGetByID(_ context.Context, _ string, id string) (string, error) {
	return "key", q.run("APIKeyGetByID", id)
}

func (q *queries) APIKeyList(_ context.Context, _ string, arg listParams) ([]string, error) {
	return []string{"k1", "k2"}, q.run("APIKeyList", arg)
}

func newTestReads(q *queries) rowmap.Reads {
	h := rowmap.Handle[string]{DB: "db", Interpret: interpret}
	checkpoint := func(s string) *store.Checkpoint { return &store.Checkpoint{StageKey: s} }
	job := func(s string) (*store.Job, error) { return &store.Job{ID: s}, nil }
	key := func(s string) *store.APIKey { return &store.APIKey{ID: s} }
	return rowmap.Reads{
		ID: func(s string) (string, bool) {
			if s != "42" {
				return "", false
			}
			return "id42", true
		},
		Document:        rowmap.DocumentGet(h, q),
		Checkpoints:     rowmap.CheckpointList(h, q, checkpoint),
		CheckpointByKey: rowmap.CheckpointGetByStageKey(h, q, checkpoint),
		LLMAttempts:     rowmap.LLMAttemptList(h, q, func(id int64) *store.LLMAttempt { return &store.LLMAttempt{ID: id} }),
		ComputedSuccess: rowmap.JobComputedSuccessGet(h, q, job),
		Keyed:           rowmap.KeyedJob(rowmap.JobGetByIdempotencyKey(h, q), job),
		Run: rowmap.RunGetByID(h, q, func(s string) (*store.Run, error) { return &store.Run{ID: s}, nil },
			func(_ context.Context, s string, since time.Time) (*store.Run, error) {
				return &store.Run{ID: s, Progress: store.RunProgress{Items: since.Unix()}}, nil
			}),
		APIKey:  rowmap.APIKeyGetByID(h, q, key),
		APIKeys: rowmap.APIKeyList(h, q, key),
		Events: rowmap.JobEvents(h, rowmap.JobEventRows(q, func(seq int64) *store.JobEvent { return &store.JobEvent{Seq: int32(seq)} }),
			rowmap.JobExists(q)),
		SinkStates: rowmap.SinkStateList(h, q, func(s string) *store.SinkState { return &store.SinkState{Sink: s} }),
	}
}

func TestReadsIDThatIsNone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := &queries{}
	r := newTestReads(q)
	cps, err := r.CheckpointList(ctx, &store.CheckpointListParams{JobID: "x"})
	require.NoError(t, err, "no job has such an id: no checkpoints")
	require.Nil(t, cps)
	attempts, err := r.LLMAttemptList(ctx, &store.LLMAttemptListParams{JobID: "x"})
	require.NoError(t, err)
	require.Nil(t, attempts)
	_, err = r.RunGet(ctx, &store.RunGetParams{ID: "x"})
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = r.JobEventList(ctx, &store.JobEventListParams{JobID: "x"})
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Empty(t, q.ran, "no query for an id no row has")
}

func TestReadsMapRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := &queries{}
	r := newTestReads(q)

	doc, err := r.DocumentGet(ctx, &store.DocumentGetParams{Tenant: "t", SHA256: "h"})
	require.NoError(t, err)
	require.Equal(t, []byte("doc"), doc)
	cps, err := r.CheckpointList(ctx, &store.CheckpointListParams{JobID: "42"})
	require.NoError(t, err)
	require.Equal(t, []*store.Checkpoint{{StageKey: "a"}, {StageKey: "b"}}, cps)
	cp, err := r.CheckpointGetByStageKey(ctx, &store.CheckpointGetByStageKeyParams{Tenant: "t", StageKey: "k"})
	require.NoError(t, err)
	require.Equal(t, "a", cp.StageKey)
	attempts, err := r.LLMAttemptList(ctx, &store.LLMAttemptListParams{JobID: "42"})
	require.NoError(t, err)
	require.Equal(t, []*store.LLMAttempt{{ID: 7}}, attempts)
	job, err := r.JobComputedSuccessGet(ctx, &store.JobComputedSuccessGetParams{Tenant: "t", DedupKey: "d"})
	require.NoError(t, err)
	require.Equal(t, "job", job.ID)
	run, err := r.RunGet(ctx, &store.RunGetParams{Tenant: "t", ID: "42", WithoutProgress: true})
	require.NoError(t, err)
	require.Equal(t, &store.Run{ID: "run"}, run, "without progress: the row alone")
	run, err = r.RunGet(ctx, &store.RunGetParams{Tenant: "t", ID: "42", RecentSince: time.Unix(5, 0)})
	require.NoError(t, err)
	require.Equal(t, int64(5), run.Progress.Items, "with progress, since RecentSince")
	key, err := r.APIKeyGetByID(ctx, &store.APIKeyGetByIDParams{ID: "k"})
	require.NoError(t, err)
	require.Equal(t, "key", key.ID)
	keys, err := r.APIKeyList(ctx, &store.APIKeyListParams{Tenant: "t", IncludeRevoked: true, Limit: 5})
	require.NoError(t, err)
	require.Equal(t, []*store.APIKey{{ID: "k1"}, {ID: "k2"}}, keys)
	states, err := r.SinkStateList(ctx, &store.SinkStateListParams{Tenant: "t"})
	require.NoError(t, err)
	require.Equal(t, []*store.SinkState{{Sink: "s1"}}, states)

	require.Equal(t, []any{
		docParams{Tenant: "t", Sha256: "h"}, "id42", stageKeyParams{Tenant: "t", StageKey: "k"}, "id42",
		dedupParams{Tenant: "t", DedupKey: "d"}, runParams{Tenant: "t", ID: "id42"}, runParams{Tenant: "t", ID: "id42"},
		"k", listParams{Tenant: "t", IncludeRevoked: true, Max: 5}, "t",
	}, q.args, "each query gets the params it names, the id as the store reads it")
}

func TestReadsJobGetByIdempotencyKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := &queries{}
	r := newTestReads(q)
	res, err := r.JobGetByIdempotencyKey(ctx, &store.JobGetByIdempotencyKeyParams{Tenant: "t", Method: "m", IdempotencyKey: "k", Fingerprint: "fp"})
	require.NoError(t, err)
	require.Equal(t, &store.JobSubmitResult{Job: &store.Job{ID: "job"}, Outcome: store.OutcomeExisting}, res)
	require.Equal(t, []any{keyParams{Tenant: "t", Method: "m", IdempotencyKey: "k"}}, q.args)

	_, err = r.JobGetByIdempotencyKey(ctx, &store.JobGetByIdempotencyKeyParams{Tenant: "t", Method: "m", IdempotencyKey: "k", Fingerprint: "other"})
	require.ErrorIs(t, err, store.ErrIdempotencyKeyReused, "the key is bound to another request")
}

func TestReadsQueryFailed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newTestReads(&queries{fail: errQuery})
	_, err := r.DocumentGet(ctx, &store.DocumentGetParams{})
	require.ErrorIs(t, err, errRead, "the query's error as the store reads it")
	_, err = r.CheckpointList(ctx, &store.CheckpointListParams{JobID: "42"})
	require.ErrorIs(t, err, errRead)
	_, err = r.CheckpointGetByStageKey(ctx, &store.CheckpointGetByStageKeyParams{})
	require.ErrorIs(t, err, errRead)
	_, err = r.LLMAttemptList(ctx, &store.LLMAttemptListParams{JobID: "42"})
	require.ErrorIs(t, err, errRead)
	_, err = r.JobComputedSuccessGet(ctx, &store.JobComputedSuccessGetParams{})
	require.ErrorIs(t, err, errRead)
	_, err = r.JobGetByIdempotencyKey(ctx, &store.JobGetByIdempotencyKeyParams{})
	require.ErrorIs(t, err, errRead)
	_, err = r.RunGet(ctx, &store.RunGetParams{ID: "42"})
	require.ErrorIs(t, err, errRead)
	_, err = r.APIKeyGetByID(ctx, &store.APIKeyGetByIDParams{ID: "k"})
	require.ErrorIs(t, err, errRead)
	_, err = r.APIKeyList(ctx, &store.APIKeyListParams{})
	require.ErrorIs(t, err, errRead)
	_, err = r.JobEventList(ctx, &store.JobEventListParams{JobID: "42"})
	require.ErrorIs(t, err, errRead)
	_, err = r.SinkStateList(ctx, &store.SinkStateListParams{})
	require.ErrorIs(t, err, errRead)
}

// TestReadsJobEventList: a page of events is the answer; an empty page
// asks whether the job exists, on the same snapshot, and is ErrNotFound
// when it does not.
func TestReadsJobEventList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := &queries{events: []int64{3, 4}}
	r := newTestReads(q)
	events, err := r.JobEventList(ctx, &store.JobEventListParams{Tenant: "t", JobID: "42", AfterSeq: 2, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []*store.JobEvent{{Seq: 3}, {Seq: 4}}, events)
	require.Equal(t, []any{eventParams{Tenant: "t", JobID: "id42", AfterSeq: 2, Max: 10}}, q.args, "no question of existence")

	q = &queries{exists: true}
	r = newTestReads(q)
	snapshots := 0
	r.Events = rowmap.JobEvents(rowmap.Handle[string]{DB: "db", Interpret: interpret,
		Snapshot: func(_ context.Context, read func(string) error) error {
			snapshots++
			return read("snapshot")
		}}, rowmap.JobEventRows(q, func(seq int64) *store.JobEvent { return &store.JobEvent{Seq: int32(seq)} }), rowmap.JobExists(q))
	events, err = r.JobEventList(ctx, &store.JobEventListParams{Tenant: "t", JobID: "42"})
	require.NoError(t, err)
	require.Empty(t, events, "no new events of a job that exists")
	require.Equal(t, existsParams{Tenant: "t", ID: "id42"}, q.args[1])
	require.Equal(t, []string{"snapshot", "snapshot"}, q.dbs, "both queries on the snapshot's handle")
	require.Equal(t, 1, snapshots)

	q.exists = false
	_, err = r.JobEventList(ctx, &store.JobEventListParams{Tenant: "t", JobID: "42"})
	require.ErrorIs(t, err, store.ErrNotFound, "no such job")
}
