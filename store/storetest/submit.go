package storetest

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// exerciseSubmitMany is the conformance suite of JobSubmitMany and
// JobGetByIdempotencyKey.
func exerciseSubmitMany(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()

	type testBundle struct {
		store Store
		ctx   context.Context
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return &testBundle{store: newStore(t), ctx: t.Context()}
	}

	submitMany := func(t *testing.T, b *testBundle, jobs ...*store.JobSubmitParams) []store.JobSubmitItem {
		t.Helper()
		res, err := b.store.JobSubmitMany(b.ctx, &store.JobSubmitManyParams{Jobs: jobs})
		require.NoError(t, err)
		require.Len(t, res.Items, len(jobs))
		return res.Items
	}

	// again is a replay of p: the same request with the id the server drew
	// for the new call.
	again := func(t *testing.T, p *store.JobSubmitParams) *store.JobSubmitParams {
		t.Helper()
		r := *p
		r.ID = newUUID(t)
		return &r
	}

	// sameKey is another request under p's key.
	sameKey := func(t *testing.T, p *store.JobSubmitParams) *store.JobSubmitParams {
		t.Helper()
		other := newSubmitParams(t)
		other.Tenant, other.Method, other.IdempotencyKey = p.Tenant, p.Method, p.IdempotencyKey
		return other
	}

	requireCreated := func(t *testing.T, b *testBundle, p *store.JobSubmitParams, item store.JobSubmitItem) {
		t.Helper()
		require.NoError(t, item.Err)
		require.Equal(t, store.OutcomeCreated, item.Outcome)
		require.Equal(t, p.ID, item.Job.ID)
		require.Equal(t, p.IdempotencyKey, item.Job.IdempotencyKey)
		require.Equal(t, store.JobStatusQueued, item.Job.Status)
		got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: p.Tenant, ID: p.ID})
		require.NoError(t, err)
		require.Equal(t, item.Job, got)
		events := requireConsecutiveEvents(t, b.store, got)
		require.Len(t, events, 1)
	}

	// requireKeyFree asserts p's key is bound to nothing and p created no
	// job.
	requireKeyFree := func(t *testing.T, b *testBundle, p *store.JobSubmitParams) {
		t.Helper()
		_, err := b.store.JobGetByIdempotencyKey(b.ctx, &store.JobGetByIdempotencyKeyParams{
			Tenant: p.Tenant, Method: p.Method, IdempotencyKey: p.IdempotencyKey, Fingerprint: p.Fingerprint,
		})
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: p.Tenant, ID: p.ID})
		require.ErrorIs(t, err, store.ErrNotFound)
	}

	t.Run("CreatesEachInOneCallAndAnswersInOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		var jobs []*store.JobSubmitParams
		for i := range 50 {
			p := newSubmitParams(t)
			if i%2 == 1 {
				p.Tenant = "tenant-b"
			}
			jobs = append(jobs, p)
		}
		items := submitMany(t, b, jobs...)
		for i, p := range jobs {
			requireCreated(t, b, p, items[i])
		}
		require.Equal(t, 25, countJobs(t, b.store, "tenant-a"))
		require.Equal(t, 25, countJobs(t, b.store, "tenant-b"))
	})

	t.Run("ReplayedCallIsExistingAndWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		var jobs, replays []*store.JobSubmitParams
		for range 20 {
			p := newSubmitParams(t)
			jobs = append(jobs, p)
			replays = append(replays, again(t, p))
		}
		first := submitMany(t, b, jobs...)
		second := submitMany(t, b, replays...)
		for i := range jobs {
			require.NoError(t, second[i].Err)
			require.Equal(t, store.OutcomeExisting, second[i].Outcome)
			require.Equal(t, first[i].Job, second[i].Job)
		}
		require.Equal(t, 20, countJobs(t, b.store, "tenant-a"))
	})

	t.Run("EachSubmissionGetsItsOwnAnswer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		existing := newSubmitParams(t)
		submit(t, b.store, existing)
		source := submit(t, b.store, newSubmitParams(t))
		_, err := Complete(b.ctx, b.store, &CompleteParams{Tenant: source.Tenant, ID: source.ID, Output: []byte(`{"total": 42}`)})
		require.NoError(t, err)

		fresh := newSubmitParams(t)
		replay := again(t, existing)
		reused := sameKey(t, existing)
		dedup := newSubmitParams(t)
		dedup.DedupKey = source.DedupKey
		otherTenant := newSubmitParams(t)
		otherTenant.Tenant = "tenant-b"
		otherTenant.DedupKey = source.DedupKey // dedup never crosses tenants
		notJSON := newSubmitParams(t)
		notJSON.Params = []byte(`{"currency": "EUR"`) // the database refuses it
		badID := newSubmitParams(t)
		badID.ID = "not-a-uuid"
		last := newSubmitParams(t)

		items := submitMany(t, b, fresh, replay, reused, notJSON, dedup, badID, otherTenant, last)

		requireCreated(t, b, fresh, items[0])
		require.NoError(t, items[1].Err)
		require.Equal(t, store.OutcomeExisting, items[1].Outcome)
		require.Equal(t, existing.ID, items[1].Job.ID)
		require.ErrorIs(t, items[2].Err, store.ErrIdempotencyKeyReused)
		require.ErrorIs(t, items[3].Err, store.ErrInvalidRow)
		requireKeyFree(t, b, notJSON)
		require.NoError(t, items[4].Err)
		require.Equal(t, store.OutcomeDeduplicated, items[4].Outcome)
		require.Equal(t, store.JobStatusSucceeded, items[4].Job.Status)
		require.Equal(t, source.ID, items[4].Job.DeduplicatedFrom)
		require.JSONEq(t, `{"total": 42}`, string(items[4].Job.Output))
		require.ErrorIs(t, items[5].Err, store.ErrInvalidRow)
		require.NoError(t, items[6].Err)
		require.Equal(t, store.OutcomeCreated, items[6].Outcome)
		require.Empty(t, items[6].Job.DeduplicatedFrom)
		requireCreated(t, b, last, items[7])

		// A refused submission consumed nothing: its key creates a job now.
		fixed := again(t, notJSON)
		fixed.Params = []byte(`{"currency": "EUR"}`)
		fixed.Fingerprint = "fp-fixed"
		requireCreated(t, b, fixed, submitMany(t, b, fixed)[0])
	})

	t.Run("RepeatsOfAKeyInOneCallAreOneIntent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		a := newSubmitParams(t)
		other := newSubmitParams(t)
		items := submitMany(t, b, a, again(t, a), sameKey(t, a), other, again(t, a))
		requireCreated(t, b, a, items[0])
		for _, i := range []int{1, 4} {
			require.NoError(t, items[i].Err)
			require.Equal(t, store.OutcomeExisting, items[i].Outcome)
			require.Equal(t, a.ID, items[i].Job.ID)
		}
		require.ErrorIs(t, items[2].Err, store.ErrIdempotencyKeyReused)
		requireCreated(t, b, other, items[3])
		require.Equal(t, 2, countJobs(t, b.store, "tenant-a"))

		// The key is bound to a's request: a call whose first submission
		// under it is another request (refused) still answers a later
		// submission of a's request as a replay.
		items = submitMany(t, b, sameKey(t, a), again(t, a))
		require.ErrorIs(t, items[0].Err, store.ErrIdempotencyKeyReused)
		require.NoError(t, items[1].Err)
		require.Equal(t, store.OutcomeExisting, items[1].Outcome)
		require.Equal(t, a.ID, items[1].Job.ID)

		// A first submission the database refuses binds nothing: a later
		// one under the same key with a valid request creates the job.
		bad := newSubmitParams(t)
		bad.Params = []byte(`not json`)
		good := sameKey(t, bad)
		items = submitMany(t, b, bad, good)
		require.ErrorIs(t, items[0].Err, store.ErrInvalidRow)
		requireCreated(t, b, good, items[1])
	})

	t.Run("ConcurrentCallsSharingKeysCreateOneJobPerKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		const callers, shared, own = 8, 40, 10
		var keys []*store.JobSubmitParams
		for i := range shared {
			p := newSubmitParams(t)
			if i%4 == 0 {
				p.Tenant = "tenant-b"
			}
			keys = append(keys, p)
		}
		calls := make([][]*store.JobSubmitParams, callers)
		for c := range calls {
			for _, p := range keys {
				calls[c] = append(calls[c], again(t, p))
			}
			for range own {
				calls[c] = append(calls[c], newSubmitParams(t))
			}
			// Every call in another order, so the calls' inserts cross.
			rand.Shuffle(len(calls[c]), func(i, j int) { calls[c][i], calls[c][j] = calls[c][j], calls[c][i] })
		}
		results := make([]*store.JobSubmitManyResult, callers)
		errs := make([]error, callers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for c := range callers {
			wg.Go(func() {
				<-start
				results[c], errs[c] = b.store.JobSubmitMany(b.ctx, &store.JobSubmitManyParams{Jobs: calls[c]})
			})
		}
		close(start)
		wg.Wait()

		jobOf := make(map[string]string) // key -> job id
		created := make(map[string]int)
		for c := range callers {
			require.NoError(t, errs[c])
			for i, item := range results[c].Items {
				p := calls[c][i]
				require.NoError(t, item.Err)
				if item.Outcome == store.OutcomeCreated {
					created[p.IdempotencyKey]++
					require.Equal(t, p.ID, item.Job.ID)
				} else {
					require.Equal(t, store.OutcomeExisting, item.Outcome)
				}
				if id, ok := jobOf[p.IdempotencyKey]; ok {
					require.Equal(t, id, item.Job.ID, "key %s answered with two jobs", p.IdempotencyKey)
				}
				jobOf[p.IdempotencyKey] = item.Job.ID
			}
		}
		require.Len(t, jobOf, shared+callers*own)
		for key, n := range created {
			require.Equal(t, 1, n, "key %s created %d jobs", key, n)
		}
		require.Len(t, created, shared+callers*own)
		require.Equal(t, shared/4, countJobs(t, b.store, "tenant-b"))
		require.Equal(t, shared-shared/4+callers*own, countJobs(t, b.store, "tenant-a"))
	})

	t.Run("GetByIdempotencyKeyReadsWithoutWriting", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		p := newSubmitParams(t)
		get := func(fingerprint string) (*store.JobSubmitResult, error) {
			return b.store.JobGetByIdempotencyKey(b.ctx, &store.JobGetByIdempotencyKeyParams{
				Tenant: p.Tenant, Method: p.Method, IdempotencyKey: p.IdempotencyKey, Fingerprint: fingerprint,
			})
		}
		_, err := get(p.Fingerprint)
		require.ErrorIs(t, err, store.ErrNotFound)
		requireKeyFree(t, b, p)

		job := submit(t, b.store, p)
		res, err := get(p.Fingerprint)
		require.NoError(t, err)
		require.Equal(t, store.OutcomeExisting, res.Outcome)
		require.Equal(t, job, res.Job)
		_, err = get("another-fingerprint")
		require.ErrorIs(t, err, store.ErrIdempotencyKeyReused)

		// Scoped by tenant and method.
		_, err = b.store.JobGetByIdempotencyKey(b.ctx, &store.JobGetByIdempotencyKeyParams{
			Tenant: "tenant-b", Method: p.Method, IdempotencyKey: p.IdempotencyKey, Fingerprint: p.Fingerprint,
		})
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = b.store.JobGetByIdempotencyKey(b.ctx, &store.JobGetByIdempotencyKeyParams{
			Tenant: p.Tenant, Method: "/oncejob.v1.JobService/ReplayJob", IdempotencyKey: p.IdempotencyKey, Fingerprint: p.Fingerprint,
		})
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("EmptyCallAnswersNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, err := b.store.JobSubmitMany(b.ctx, &store.JobSubmitManyParams{})
		require.NoError(t, err)
		require.Empty(t, res.Items)
	})
}

// countJobs counts the tenant's jobs, every page.
func countJobs(t *testing.T, s store.Store, tenant string) int {
	t.Helper()
	n := 0
	var after *store.JobCursor
	for {
		res, err := s.JobList(t.Context(), &store.JobListParams{Tenant: tenant, Limit: 500, After: after})
		require.NoError(t, err)
		n += len(res.Jobs)
		if res.Next == nil {
			return n
		}
		after = res.Next
	}
}
