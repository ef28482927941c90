package storesqlite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
	"github.com/oncejob/oncejob/store/storetest"
)

func openSetTestStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// setSubmission is a new submission with a document of size bytes.
func setSubmission(size int) *store.JobSubmitParams {
	key := uuid.NewString()
	doc := []byte(key + strings.Repeat("x", max(0, size-len(key))))
	sum := sha256.Sum256(doc)
	return &store.JobSubmitParams{
		ID: uuid.NewString(), Tenant: "tenant-a", Method: "/oncejob.v1.JobService/SubmitJob",
		IdempotencyKey: "key-" + key, Fingerprint: "fp-" + key, DedupKey: "dedup:v1:" + key,
		Pipeline: "invoice", PipelineVersion: 3, PromptVersion: "p7", ModelProfile: "fast",
		Document: doc, DocumentSHA256: hex.EncodeToString(sum[:]), DocumentMedia: "text/plain",
		DocumentName: "invoice.txt", Params: []byte(`{"currency":"EUR"}`),
		Labels: map[string]string{"team": "billing"},
	}
}

// trySet runs jobSubmitSet over jobs in one write and reports whether the
// batch was written set-wise, with the answers.
func trySet(t *testing.T, s *Store, jobs []*store.JobSubmitParams) (bool, []store.JobSubmitItem) {
	t.Helper()
	items := make([]store.JobSubmitItem, len(jobs))
	args := make([]dbsqlite.JobInsertParams, len(jobs))
	for i, p := range jobs {
		var err error
		args[i], err = jobInsertArgs(p)
		require.NoError(t, err)
	}
	var done bool
	require.NoError(t, s.inWriteTx(t.Context(), func(ctx context.Context, tx *writeTx, _ int64) error {
		var err error
		done, err = s.jobSubmitSet(ctx, tx, jobs, args, items)
		return err
	}))
	return done, items
}

// TestJobSubmitSetWritesABatchSetWise: a clean batch (new keys, a replay, a
// reuse and a deduplicated one) is answered by the set-wise write alone,
// each submission as it would be alone, with its first event and its own
// increasing timestamp; a batch with a value the database refuses is rolled
// back whole and left to the per-submission path, with nothing written.
func TestJobSubmitSetWritesABatchSetWise(t *testing.T) {
	t.Parallel()
	s := openSetTestStore(t)
	ctx := t.Context()

	existing := setSubmission(64)
	_, err := s.JobSubmit(ctx, existing)
	require.NoError(t, err)
	source := setSubmission(64)
	src, err := s.JobSubmit(ctx, source)
	require.NoError(t, err)
	_, err = storetest.Complete(ctx, s, &storetest.CompleteParams{Tenant: src.Job.Tenant, ID: src.Job.ID, Output: []byte(`{"total":42}`)})
	require.NoError(t, err)

	a, b := setSubmission(1024), setSubmission(0)
	replay := *existing
	replay.ID = uuid.NewString()
	reused := replay
	reused.Fingerprint = "fp-other"
	dedup := setSubmission(64)
	dedup.DedupKey = source.DedupKey

	done, items := trySet(t, s, []*store.JobSubmitParams{a, &replay, &reused, dedup, b})
	require.True(t, done, "a clean batch is written set-wise")
	require.NoError(t, items[0].Err)
	require.Equal(t, store.OutcomeCreated, items[0].Outcome)
	require.Equal(t, store.JobStatusQueued, items[0].Job.Status)
	require.Equal(t, a.ID, items[0].Job.ID)
	require.Equal(t, store.OutcomeExisting, items[1].Outcome)
	require.Equal(t, existing.ID, items[1].Job.ID)
	require.ErrorIs(t, items[2].Err, store.ErrIdempotencyKeyReused)
	require.Equal(t, store.OutcomeDeduplicated, items[3].Outcome)
	require.Equal(t, src.Job.ID, items[3].Job.DeduplicatedFrom)
	require.JSONEq(t, `{"total":42}`, string(items[3].Job.Output))
	require.Equal(t, store.OutcomeCreated, items[4].Outcome)
	require.True(t, items[0].Job.CreatedAt.Before(items[4].Job.CreatedAt))
	require.JSONEq(t, `{"currency":"EUR"}`, string(items[0].Job.Params))
	require.Equal(t, map[string]string{"team": "billing"}, items[0].Job.Labels)

	for i, want := range map[int]string{0: "submitted", 3: "deduplicated from " + src.Job.ID, 4: "submitted"} {
		events, err := s.JobEventList(ctx, &store.JobEventListParams{Tenant: "tenant-a", JobID: items[i].Job.ID})
		require.NoError(t, err)
		require.Len(t, events, 1)
		require.EqualValues(t, 1, events[0].Seq)
		require.Equal(t, want, events[0].Message)
	}
	for _, p := range []*store.JobSubmitParams{a, b} {
		doc, err := s.DocumentGet(ctx, &store.DocumentGetParams{Tenant: p.Tenant, SHA256: p.DocumentSHA256})
		require.NoError(t, err)
		require.Equal(t, p.Document, doc)
	}

	good, bad := setSubmission(64), setSubmission(64)
	bad.Params = []byte(`{"currency": "EUR"`) // CHECK json_valid refuses it
	done, items = trySet(t, s, []*store.JobSubmitParams{good, bad})
	require.False(t, done, "a refused value sends the batch to the per-submission path")
	require.Equal(t, make([]store.JobSubmitItem, 2), items)
	for _, p := range []*store.JobSubmitParams{good, bad} {
		_, err := s.JobGetByIdempotencyKey(ctx, &store.JobGetByIdempotencyKeyParams{Tenant: p.Tenant, Method: p.Method, IdempotencyKey: p.IdempotencyKey})
		require.ErrorIs(t, err, store.ErrNotFound, "the rolled-back batch wrote nothing")
	}
}

// BenchmarkJobSubmitMany1000 is the embedded store's share of a 1,000-item
// SubmitJobs call with 1 KiB documents (docs/performance.md).
func BenchmarkJobSubmitMany1000(b *testing.B) {
	s := openSetTestStore(b)
	for b.Loop() {
		b.StopTimer()
		jobs := make([]*store.JobSubmitParams, 1000)
		for i := range jobs {
			jobs[i] = setSubmission(1024)
		}
		b.StartTimer()
		res, err := s.JobSubmitMany(b.Context(), &store.JobSubmitManyParams{Jobs: jobs})
		require.NoError(b, err)
		require.Equal(b, store.OutcomeCreated, res.Items[999].Outcome)
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "items/s")
}

// TestJSONArrayIsWhatJSONEachReads: every string comes back from SQLite's
// JSON functions as it went in, and a string with no JSON form (invalid
// UTF-8, a NUL) is refused, so its submission is written alone.
func TestJSONArrayIsWhatJSONEachReads(t *testing.T) {
	t.Parallel()
	s := openSetTestStore(t)
	tricky := []string{"", `quote " and \ backslash`, "tab\tnew\nline\rcr \x01\x1f\x7f", "ünïcødé ✓ \u2028 😀", "</script>&"}
	for _, v := range tricky {
		enc, err := jsonArray([][]any{{v, 42, int64(-7)}})
		require.NoError(t, err)
		var back string
		var n, m int64
		require.NoError(t, s.read.QueryRowContext(t.Context(),
			`SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each(?)`, enc).Scan(&back, &n, &m))
		require.Equal(t, v, back)
		require.Equal(t, int64(42), n)
		require.Equal(t, int64(-7), m)
	}
	for _, v := range []string{"bad \xff utf-8", "nul \x00 byte"} {
		_, err := jsonArray([][]any{{v}})
		require.ErrorIs(t, err, errNoJSONForm)
	}
}
