package groupcommit_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncejob/oncejob/server/groupcommit"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storesqlite/storesqlitetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder is a store whose JobSubmitMany calls are counted.
type recorder struct {
	store.Store
	mu      sync.Mutex
	batches []int
}

func (r *recorder) JobSubmitMany(ctx context.Context, p *store.JobSubmitManyParams) (*store.JobSubmitManyResult, error) {
	r.mu.Lock()
	r.batches = append(r.batches, len(p.Jobs))
	r.mu.Unlock()
	return r.Store.JobSubmitMany(ctx, p)
}

func (r *recorder) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.batches...)
}

func setup(t *testing.T, linger time.Duration, maxBatch int) (*groupcommit.Batcher, *recorder) {
	t.Helper()
	st := storesqlitetest.NewTestStore(t)
	r := &recorder{Store: st}
	b, err := groupcommit.New(groupcommit.Config{SubmitMany: r.JobSubmitMany, Linger: linger, MaxBatch: maxBatch})
	require.NoError(t, err)
	return b, r
}

func newParams() *store.JobSubmitParams {
	doc := []byte("document " + uuid.NewString())
	sum := sha256.Sum256(doc)
	key := uuid.NewString()
	return &store.JobSubmitParams{
		ID: uuid.NewString(), Tenant: "acme", Method: "/oncejob.v1.JobService/SubmitJob",
		IdempotencyKey: key, Fingerprint: "fp-" + key, DedupKey: "dedup:v1:" + key,
		Pipeline: "summarize", PipelineVersion: 1, Document: doc, DocumentSHA256: hex.EncodeToString(sum[:]),
		DocumentMedia: "text/plain", Params: []byte(`{}`),
	}
}

// TestOneWriteAnswersEachCallerAlone fills one batch with good submissions,
// one the database refuses and one reusing another's key: one store write,
// and each caller gets its own answer.
func TestOneWriteAnswersEachCallerAlone(t *testing.T) {
	t.Parallel()
	// The linger is longer than any test: the batch is written when full.
	b, r := setup(t, time.Hour, 5)

	good := []*store.JobSubmitParams{newParams(), newParams(), newParams()}
	bad := newParams()
	bad.Params = []byte(`{"not": json}`)
	reuse := newParams()
	reuse.IdempotencyKey = good[0].IdempotencyKey
	all := append(append([]*store.JobSubmitParams{}, good...), bad, reuse)

	results := make([]*store.JobSubmitResult, len(all))
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, p := range all {
		wg.Go(func() { results[i], errs[i] = b.Submit(t.Context(), p) })
	}
	wg.Wait()

	require.Equal(t, []int{5}, r.sizes())
	// good[0] and reuse race for one key: whichever the batch holds first
	// creates the job, the other is a reuse.
	var created, reused int
	for _, i := range []int{0, 4} {
		if errs[i] == nil {
			created++
			require.Equal(t, store.OutcomeCreated, results[i].Outcome)
			require.Equal(t, all[i].ID, results[i].Job.ID)
		} else {
			reused++
			require.ErrorIs(t, errs[i], store.ErrIdempotencyKeyReused)
		}
	}
	require.Equal(t, 1, created)
	require.Equal(t, 1, reused)
	for _, i := range []int{1, 2} {
		require.NoError(t, errs[i])
		require.Equal(t, store.OutcomeCreated, results[i].Outcome)
		require.Equal(t, all[i].ID, results[i].Job.ID)
	}
	require.ErrorIs(t, errs[3], store.ErrInvalidRow)
}

// TestMaxBytesEndsABatch: a batch is written once its documents hold
// MaxBytes, before it holds MaxBatch submissions; a document of MaxBytes or
// more goes alone.
func TestMaxBytesEndsABatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		docs []int // document sizes, submitted one after another
		want []int // the batches written
	}{
		{docs: []int{40, 40, 40, 40}, want: []int{3, 1}}, // 120 bytes after the third
		{docs: []int{100}, want: []int{1}},
		{docs: []int{250, 10, 10}, want: []int{1, 2}},
		{docs: []int{10, 10, 10, 10, 10}, want: []int{5}}, // under MaxBytes: MaxBatch ends it
	} {
		st := storesqlitetest.NewTestStore(t)
		r := &recorder{Store: st}
		b, err := groupcommit.New(groupcommit.Config{SubmitMany: r.JobSubmitMany, Linger: time.Hour, MaxBatch: 5, MaxBytes: 100})
		require.NoError(t, err)
		b.TestSignals().Queued.Init()
		var wg sync.WaitGroup
		for i, size := range tc.docs {
			p := newParams()
			p.Document = []byte(strings.Repeat("x", size-len(strconv.Itoa(i))) + strconv.Itoa(i))
			digest := sha256.Sum256(p.Document)
			p.DocumentSHA256 = hex.EncodeToString(digest[:])
			wg.Go(func() {
				_, err := b.Submit(t.Context(), p)
				assert.NoError(t, err)
			})
			// One after another: each joins the batch before the next.
			_, err := b.TestSignals().Queued.Wait()
			require.NoError(t, err)
		}
		b.Flush() // the last batch, under both bounds, would wait for its linger
		wg.Wait()
		require.Equal(t, tc.want, r.sizes(), "documents %v", tc.docs)
	}
}

// TestLingerWritesAPartialBatch checks that a submission alone is written
// once its linger has passed.
func TestLingerWritesAPartialBatch(t *testing.T) {
	t.Parallel()
	b, r := setup(t, 5*time.Millisecond, 100)
	p := newParams()
	res, err := b.Submit(t.Context(), p)
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCreated, res.Outcome)
	require.Equal(t, []int{1}, r.sizes())
}

// TestNoLingerWritesEachAlone checks that a negative linger turns the group
// commit off.
func TestNoLingerWritesEachAlone(t *testing.T) {
	t.Parallel()
	b, r := setup(t, -1, 100)
	for range 3 {
		_, err := b.Submit(t.Context(), newParams())
		require.NoError(t, err)
	}
	require.Equal(t, []int{1, 1, 1}, r.sizes())
}

// TestCallerGoneBeforeTheWriteIsLeftOut checks that a submission whose
// caller gave up before its batch was written is not written.
func TestCallerGoneBeforeTheWriteIsLeftOut(t *testing.T) {
	t.Parallel()
	b, r := setup(t, time.Hour, 2)

	gone := newParams()
	ctx, cancel := context.WithCancel(t.Context())
	returned := make(chan error)
	go func() {
		_, err := b.Submit(ctx, gone)
		returned <- err
	}()
	cancel()
	require.ErrorIs(t, <-returned, context.Canceled)

	stays := newParams()
	res, err := b.Submit(t.Context(), stays) // fills the batch of two
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCreated, res.Outcome)
	require.Equal(t, []int{1}, r.sizes())
	_, err = r.JobGetByIdempotencyKey(t.Context(), &store.JobGetByIdempotencyKeyParams{
		Tenant: gone.Tenant, Method: gone.Method, IdempotencyKey: gone.IdempotencyKey, Fingerprint: gone.Fingerprint,
	})
	require.ErrorIs(t, err, store.ErrNotFound)
}
