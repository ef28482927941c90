// Package storetest is the conformance suite of the store interfaces. Every
// implementation runs Exercise against a real database, so each store-level
// behaviour is specified and tested once, here.
package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// Store is what the suite exercises: every store interface and the
// factory's seam. A store's test passes Exercise a constructor of its own
// type, so the compiler checks that it implements them all.
type Store interface {
	store.Store
	store.EngineStore
	store.CheckpointBatchWriter
	store.OperatorStore
	store.WatchStore
	store.ViewStore
	store.FactoryStore
	store.DeliveryStore
	store.RunStore
	store.ProviderBatchStore
	store.ScheduleStore
	store.APIKeyStore
	store.UsageStore
	store.StatsStore
	store.SecretStore
	store.ProviderLimitStore
}

// Exercise runs the suite. newStore returns an empty, migrated store that
// belongs to the calling test alone; it is called once per subtest, and
// subtests run in parallel.
func Exercise(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()

	type testBundle struct {
		store Store
		ctx   context.Context
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return &testBundle{store: newStore(t), ctx: t.Context()}
	}

	t.Run("JobSubmit", func(t *testing.T) {
		t.Parallel()

		t.Run("CreatesQueuedJobWithFirstEvent", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			params := newSubmitParams(t)
			res, err := b.store.JobSubmit(b.ctx, params)
			require.NoError(t, err)
			require.Equal(t, store.OutcomeCreated, res.Outcome)

			job := res.Job
			require.Equal(t, params.ID, job.ID)
			require.Equal(t, params.Tenant, job.Tenant)
			require.Equal(t, params.IdempotencyKey, job.IdempotencyKey)
			require.Equal(t, params.DedupKey, job.DedupKey)
			require.Equal(t, params.Pipeline, job.Pipeline)
			require.Equal(t, params.PipelineVersion, job.PipelineVersion)
			require.Equal(t, params.PromptVersion, job.PromptVersion)
			require.Equal(t, params.ModelProfile, job.ModelProfile)
			require.Equal(t, store.JobStatusQueued, job.Status)
			require.Equal(t, store.JobStageUploaded, job.Stage)
			require.Zero(t, job.Attempt)
			require.Nil(t, job.Output)
			require.Nil(t, job.Error)
			require.Empty(t, job.DeduplicatedFrom)
			require.Zero(t, job.Usage)
			require.Equal(t, params.DocumentSHA256, job.DocumentSHA256)
			require.Equal(t, params.DocumentMedia, job.DocumentMedia)
			require.Equal(t, params.DocumentName, job.DocumentName)
			require.Equal(t, int64(len(params.Document)), job.DocumentSize)
			require.JSONEq(t, string(params.Params), string(job.Params))
			require.Equal(t, params.Labels, job.Labels)
			require.WithinDuration(t, time.Now(), job.CreatedAt, time.Minute)
			require.Nil(t, job.FinishedAt)

			got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: params.Tenant, ID: job.ID})
			require.NoError(t, err)
			require.Equal(t, job, got)

			events, err := b.store.JobEventList(b.ctx, &store.JobEventListParams{Tenant: params.Tenant, JobID: job.ID})
			require.NoError(t, err)
			require.Len(t, events, 1)
			require.Equal(t, job.ID, events[0].JobID)
			require.Equal(t, int32(1), events[0].Seq)
			require.Equal(t, store.JobStatusQueued, events[0].Status)
			require.Equal(t, store.JobStageUploaded, events[0].Stage)
			require.NotEmpty(t, events[0].Message)
		})

		t.Run("ReplayReturnsTheSameJob", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			params := newSubmitParams(t)
			first, err := b.store.JobSubmit(b.ctx, params)
			require.NoError(t, err)

			// A replay arrives with the id the server drew for it, not the
			// original's.
			replay := *params
			replay.ID = newUUID(t)
			again, err := b.store.JobSubmit(b.ctx, &replay)
			require.NoError(t, err)
			require.Equal(t, store.OutcomeExisting, again.Outcome)
			require.Equal(t, first.Job, again.Job)

			requireJobIDs(t, b.store, params.Tenant, first.Job.ID)
		})

		t.Run("ConcurrentSubmitsOfOneKeyCreateOneJob", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			const callers = 64
			params := newSubmitParams(t)
			results := make([]*store.JobSubmitResult, callers)
			errs := make([]error, callers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range callers {
				call := *params
				call.ID = newUUID(t)
				wg.Go(func() {
					<-start
					results[i], errs[i] = b.store.JobSubmit(b.ctx, &call)
				})
			}
			close(start)
			wg.Wait()

			created := 0
			for i := range callers {
				require.NoError(t, errs[i])
				if results[i].Outcome == store.OutcomeCreated {
					created++
				} else {
					require.Equal(t, store.OutcomeExisting, results[i].Outcome)
				}
				require.Equal(t, results[0].Job.ID, results[i].Job.ID)
			}
			require.Equal(t, 1, created)
			requireJobIDs(t, b.store, params.Tenant, results[0].Job.ID)
		})

		t.Run("KeyReusedWithAnotherFingerprintWritesNothing", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			params := newSubmitParams(t)
			first, err := b.store.JobSubmit(b.ctx, params)
			require.NoError(t, err)

			other := newSubmitParams(t)
			other.Tenant = params.Tenant
			other.Method = params.Method
			other.IdempotencyKey = params.IdempotencyKey
			_, err = b.store.JobSubmit(b.ctx, other)
			require.ErrorIs(t, err, store.ErrIdempotencyKeyReused)

			requireJobIDs(t, b.store, params.Tenant, first.Job.ID)
			_, err = b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: other.Tenant, ID: other.ID})
			require.ErrorIs(t, err, store.ErrNotFound)
		})

		t.Run("KeyIsScopedByTenant", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			paramsA := newSubmitParams(t)
			paramsB := *paramsA
			paramsB.Tenant = "tenant-b"
			paramsB.ID = newUUID(t)

			resA, err := b.store.JobSubmit(b.ctx, paramsA)
			require.NoError(t, err)
			resB, err := b.store.JobSubmit(b.ctx, &paramsB)
			require.NoError(t, err)
			require.Equal(t, store.OutcomeCreated, resA.Outcome)
			require.Equal(t, store.OutcomeCreated, resB.Outcome)
			require.NotEqual(t, resA.Job.ID, resB.Job.ID)

			_, err = b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: paramsA.Tenant, ID: resB.Job.ID})
			require.ErrorIs(t, err, store.ErrNotFound)
			requireJobIDs(t, b.store, paramsA.Tenant, resA.Job.ID)
			requireJobIDs(t, b.store, paramsB.Tenant, resB.Job.ID)
		})

		t.Run("KeyIsScopedByMethod", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			paramsA := newSubmitParams(t)
			paramsB := *paramsA
			paramsB.Method = "/oncejob.v1.JobService/ReplayJob"
			paramsB.Fingerprint = "another-fingerprint"
			paramsB.ID = newUUID(t)

			resA, err := b.store.JobSubmit(b.ctx, paramsA)
			require.NoError(t, err)
			resB, err := b.store.JobSubmit(b.ctx, &paramsB)
			require.NoError(t, err)
			require.Equal(t, store.OutcomeCreated, resA.Outcome)
			require.Equal(t, store.OutcomeCreated, resB.Outcome)
			requireJobIDs(t, b.store, paramsA.Tenant, resB.Job.ID, resA.Job.ID)
		})

		t.Run("DocumentIsSharedByJobsOfATenant", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			first := newSubmitParams(t)
			second := newSubmitParams(t)
			second.Tenant = first.Tenant
			second.Document = first.Document
			second.DocumentSHA256 = first.DocumentSHA256

			resA, err := b.store.JobSubmit(b.ctx, first)
			require.NoError(t, err)
			resB, err := b.store.JobSubmit(b.ctx, second)
			require.NoError(t, err)
			require.Equal(t, store.OutcomeCreated, resB.Outcome)
			require.NotEqual(t, resA.Job.ID, resB.Job.ID)
			require.Equal(t, resA.Job.DocumentSHA256, resB.Job.DocumentSHA256)
			require.Equal(t, resA.Job.DocumentSize, resB.Job.DocumentSize)
		})

		t.Run("DeduplicatesAComputedSuccess", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			source := submit(t, b.store, newSubmitParams(t))
			output := []byte(`{"total": 42, "currency": "EUR"}`)
			_, err := Complete(b.ctx, b.store, &CompleteParams{Tenant: source.Tenant, ID: source.ID, Output: output})
			require.NoError(t, err)

			params := newSubmitParams(t)
			params.Tenant = source.Tenant
			params.DedupKey = source.DedupKey
			res, err := b.store.JobSubmit(b.ctx, params)
			require.NoError(t, err)
			require.Equal(t, store.OutcomeDeduplicated, res.Outcome)

			job := res.Job
			require.Equal(t, params.ID, job.ID)
			require.Equal(t, store.JobStatusSucceeded, job.Status)
			require.Equal(t, store.JobStagePublished, job.Stage)
			require.Equal(t, source.ID, job.DeduplicatedFrom)
			require.JSONEq(t, string(output), string(job.Output))
			require.NotNil(t, job.FinishedAt)

			events, err := b.store.JobEventList(b.ctx, &store.JobEventListParams{Tenant: job.Tenant, JobID: job.ID})
			require.NoError(t, err)
			require.Len(t, events, 1)
			require.Equal(t, store.JobStatusSucceeded, events[0].Status)
			require.Contains(t, events[0].Message, source.ID)

			// A replay of the deduplicated submission is that job, not a
			// new deduplication.
			again, err := b.store.JobSubmit(b.ctx, params)
			require.NoError(t, err)
			require.Equal(t, store.OutcomeExisting, again.Outcome)
			require.Equal(t, job.ID, again.Job.ID)
		})

		t.Run("DoesNotDeduplicateAcrossTenants", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			source := submit(t, b.store, newSubmitParams(t))
			_, err := Complete(b.ctx, b.store, &CompleteParams{Tenant: source.Tenant, ID: source.ID, Output: []byte(`{}`)})
			require.NoError(t, err)

			params := newSubmitParams(t)
			params.Tenant = "tenant-b"
			params.DedupKey = source.DedupKey
			res, err := b.store.JobSubmit(b.ctx, params)
			require.NoError(t, err)
			require.Equal(t, store.OutcomeCreated, res.Outcome)
			require.Equal(t, store.JobStatusQueued, res.Job.Status)
			require.Empty(t, res.Job.DeduplicatedFrom)
		})

		t.Run("DoesNotDeduplicateAnUnfinishedComputation", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			source := submit(t, b.store, newSubmitParams(t))
			params := newSubmitParams(t)
			params.Tenant = source.Tenant
			params.DedupKey = source.DedupKey
			res, err := b.store.JobSubmit(b.ctx, params)
			require.NoError(t, err)
			require.Equal(t, store.OutcomeCreated, res.Outcome)
			require.Equal(t, store.JobStatusQueued, res.Job.Status)
		})
	})

	t.Run("JobSubmitMany", func(t *testing.T) {
		t.Parallel()
		exerciseSubmitMany(t, newStore)
	})

	t.Run("JobGetByID", func(t *testing.T) {
		t.Parallel()

		t.Run("UnknownOrMalformedIDIsNotFound", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			for _, id := range []string{newUUID(t), "not-a-uuid", ""} {
				_, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: "tenant-a", ID: id})
				require.ErrorIs(t, err, store.ErrNotFound, "id %q", id)
			}
		})
	})

	// The unique index of computed successes, which JobPublishMany's
	// deduplication of concurrent publishers relies on, written to directly.
	t.Run("ComputedSuccess", func(t *testing.T) {
		t.Parallel()

		t.Run("SecondComputedSuccessOfADedupKeyIsRefused", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			first := submit(t, b.store, newSubmitParams(t))
			params := newSubmitParams(t)
			params.Tenant = first.Tenant
			params.DedupKey = first.DedupKey
			second := submit(t, b.store, params) // queued: the first has not finished

			_, err := Complete(b.ctx, b.store, &CompleteParams{Tenant: first.Tenant, ID: first.ID, Output: []byte(`{}`)})
			require.NoError(t, err)
			_, err = Complete(b.ctx, b.store, &CompleteParams{Tenant: second.Tenant, ID: second.ID, Output: []byte(`{}`)})
			require.ErrorIs(t, err, store.ErrDuplicateComputation)

			got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: second.Tenant, ID: second.ID})
			require.NoError(t, err)
			require.Equal(t, store.JobStatusQueued, got.Status)
			events, err := b.store.JobEventList(b.ctx, &store.JobEventListParams{Tenant: second.Tenant, JobID: second.ID})
			require.NoError(t, err)
			require.Len(t, events, 1)
		})
	})

	t.Run("JobEventList", func(t *testing.T) {
		t.Parallel()

		t.Run("AfterSeqAndLimit", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job := submit(t, b.store, newSubmitParams(t))
			_, err := Complete(b.ctx, b.store, &CompleteParams{Tenant: job.Tenant, ID: job.ID, Output: []byte(`{}`)})
			require.NoError(t, err)

			list := func(afterSeq int32, limit int) []int32 {
				events, err := b.store.JobEventList(b.ctx, &store.JobEventListParams{
					Tenant: job.Tenant, JobID: job.ID, AfterSeq: afterSeq, Limit: limit,
				})
				require.NoError(t, err)
				seqs := make([]int32, len(events))
				for i, e := range events {
					seqs[i] = e.Seq
				}
				return seqs
			}
			require.Equal(t, []int32{1, 2}, list(0, 0))
			require.Equal(t, []int32{1}, list(0, 1))
			require.Equal(t, []int32{2}, list(1, 0))
			require.Empty(t, list(2, 0))
		})

		t.Run("ForeignOrUnknownJobIsNotFound", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job := submit(t, b.store, newSubmitParams(t))
			for _, p := range []*store.JobEventListParams{
				{Tenant: "tenant-b", JobID: job.ID},
				{Tenant: job.Tenant, JobID: newUUID(t)},
				{Tenant: job.Tenant, JobID: "not-a-uuid"},
			} {
				_, err := b.store.JobEventList(b.ctx, p)
				require.ErrorIs(t, err, store.ErrNotFound)
			}
		})
	})

	t.Run("JobList", func(t *testing.T) {
		t.Parallel()

		t.Run("PagesAreBoundedInBytes", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			// Sizes from 1 KB to 200 KB, in a seeded random order.
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			r := rand.New(rand.NewPCG(seed, 31))
			var submitted []string
			for range 12 {
				p := newSubmitParams(t)
				p.Params = []byte(`{"blob":"` + strings.Repeat("p", 1000+r.IntN(200_000)) + `"}`)
				submitted = append(submitted, submit(t, b.store, p).ID)
			}
			slices.Reverse(submitted)
			const maxBytes = 300_000
			var seen []*store.Job
			var after *store.JobCursor
			for pages := 0; ; pages++ {
				require.Less(t, pages, len(submitted), "pagination does not end")
				res, err := b.store.JobList(b.ctx, &store.JobListParams{Tenant: "tenant-a", Limit: 5, MaxBytes: maxBytes, After: after})
				require.NoError(t, err)
				require.NotEmpty(t, res.Jobs)
				var n int64
				for _, j := range res.Jobs {
					n += int64(len(j.Params))
				}
				if len(res.Jobs) > 1 {
					require.LessOrEqual(t, n, int64(maxBytes), "a page of %d jobs went past MaxBytes", len(res.Jobs))
				}
				require.LessOrEqual(t, len(res.Jobs), 5)
				seen = append(seen, res.Jobs...)
				if res.Next == nil {
					break
				}
				after = res.Next
			}
			require.Equal(t, submitted, jobIDs(seen), "pages cut by bytes skip or repeat jobs")

			// A job over MaxBytes comes alone, and the next page follows it.
			res, err := b.store.JobList(b.ctx, &store.JobListParams{Tenant: "tenant-a", MaxBytes: 10})
			require.NoError(t, err)
			require.Len(t, res.Jobs, 1)
			require.NotNil(t, res.Next)
		})

		t.Run("NewestFirstAcrossPages", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			const total = 7
			var submitted []string
			for range total {
				submitted = append(submitted, submit(t, b.store, newSubmitParams(t)).ID)
			}
			slices.Reverse(submitted)

			var seen []*store.Job
			var after *store.JobCursor
			for pages := 0; ; pages++ {
				require.Less(t, pages, total, "pagination does not end")
				res, err := b.store.JobList(b.ctx, &store.JobListParams{Tenant: "tenant-a", Limit: 3, After: after})
				require.NoError(t, err)
				require.LessOrEqual(t, len(res.Jobs), 3)
				seen = append(seen, res.Jobs...)
				if res.Next == nil {
					break
				}
				require.Len(t, res.Jobs, 3)
				after = res.Next
			}
			require.Equal(t, submitted, jobIDs(seen))
			require.True(t, slices.IsSortedFunc(seen, func(a, b *store.Job) int {
				return -a.CreatedAt.Compare(b.CreatedAt)
			}))
		})

		t.Run("NoNextWhenTheLastPageIsFull", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			for range 4 {
				submit(t, b.store, newSubmitParams(t))
			}
			first, err := b.store.JobList(b.ctx, &store.JobListParams{Tenant: "tenant-a", Limit: 2})
			require.NoError(t, err)
			require.Len(t, first.Jobs, 2)
			require.NotNil(t, first.Next)
			second, err := b.store.JobList(b.ctx, &store.JobListParams{Tenant: "tenant-a", Limit: 2, After: first.Next})
			require.NoError(t, err)
			require.Len(t, second.Jobs, 2)
			require.Nil(t, second.Next)
		})

		t.Run("FiltersByStatusAndPipeline", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			invoice := newSubmitParams(t)
			invoice.Pipeline = "invoice"
			queuedInvoice := submit(t, b.store, invoice)

			invoice = newSubmitParams(t)
			invoice.Pipeline = "invoice"
			doneInvoice := submit(t, b.store, invoice)
			_, err := Complete(b.ctx, b.store, &CompleteParams{Tenant: doneInvoice.Tenant, ID: doneInvoice.ID, Output: []byte(`{}`)})
			require.NoError(t, err)

			receipt := newSubmitParams(t)
			receipt.Pipeline = "receipt"
			queuedReceipt := submit(t, b.store, receipt)

			list := func(p *store.JobListParams) []string {
				p.Tenant = "tenant-a"
				res, err := b.store.JobList(b.ctx, p)
				require.NoError(t, err)
				return jobIDs(res.Jobs)
			}
			require.Equal(t, []string{queuedReceipt.ID, doneInvoice.ID, queuedInvoice.ID}, list(&store.JobListParams{}))
			require.Equal(t, []string{queuedReceipt.ID, queuedInvoice.ID}, list(&store.JobListParams{Status: store.JobStatusQueued}))
			require.Equal(t, []string{doneInvoice.ID, queuedInvoice.ID}, list(&store.JobListParams{Pipeline: "invoice"}))
			require.Equal(t, []string{doneInvoice.ID}, list(&store.JobListParams{Pipeline: "invoice", Status: store.JobStatusSucceeded}))
			require.Empty(t, list(&store.JobListParams{Pipeline: "contract"}))
		})
	})

	t.Run("IdempotencyKeyDeleteExpired", func(t *testing.T) {
		t.Parallel()

		t.Run("FreedKeyCreatesANewJob", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			params := newSubmitParams(t)
			old := submit(t, b.store, params)

			// Margins of an hour keep the test independent of the clock
			// skew between this process and the database.
			n, err := b.store.IdempotencyKeyDeleteExpired(b.ctx, &store.IdempotencyKeyDeleteExpiredParams{CreatedBefore: time.Now().Add(-time.Hour)})
			require.NoError(t, err)
			require.Zero(t, n)
			n, err = b.store.IdempotencyKeyDeleteExpired(b.ctx, &store.IdempotencyKeyDeleteExpiredParams{CreatedBefore: time.Now().Add(time.Hour)})
			require.NoError(t, err)
			require.Equal(t, int64(1), n)

			again := *params
			again.ID = newUUID(t)
			res, err := b.store.JobSubmit(b.ctx, &again)
			require.NoError(t, err)
			require.Equal(t, store.OutcomeCreated, res.Outcome)
			require.Equal(t, again.ID, res.Job.ID)

			got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: old.Tenant, ID: old.ID})
			require.NoError(t, err)
			require.Equal(t, old.ID, got.ID)
		})

		t.Run("FreesAtMostLimit", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			for range 3 {
				submit(t, b.store, newSubmitParams(t))
			}
			sweep := func() int64 {
				n, err := b.store.IdempotencyKeyDeleteExpired(b.ctx, &store.IdempotencyKeyDeleteExpiredParams{
					CreatedBefore: time.Now().Add(time.Hour),
					Limit:         2,
				})
				require.NoError(t, err)
				return n
			}
			require.Equal(t, int64(2), sweep())
			require.Equal(t, int64(1), sweep())
			require.Zero(t, sweep())
		})
	})

	t.Run("Engine", func(t *testing.T) {
		t.Parallel()
		exerciseEngine(t, newStore)
	})

	t.Run("EngineBatch", func(t *testing.T) {
		t.Parallel()
		exerciseEngineBatch(t, newStore)
	})

	t.Run("Operator", func(t *testing.T) {
		t.Parallel()
		exerciseOperator(t, newStore)
	})

	t.Run("Watch", func(t *testing.T) {
		t.Parallel()
		exerciseWatch(t, newStore)
	})

	t.Run("Delivery", func(t *testing.T) {
		t.Parallel()
		exerciseDelivery(t, newStore)
	})

	t.Run("View", func(t *testing.T) {
		t.Parallel()
		exerciseView(t, newStore)
	})

	t.Run("Run", func(t *testing.T) {
		t.Parallel()
		exerciseRun(t, newStore)
	})

	t.Run("Schedule", func(t *testing.T) {
		t.Parallel()
		exerciseSchedule(t, newStore)
	})

	t.Run("APIKey", func(t *testing.T) {
		t.Parallel()
		exerciseAPIKey(t, newStore)
	})

	t.Run("Lists", func(t *testing.T) {
		t.Parallel()
		exerciseLists(t, newStore)
	})

	t.Run("Secret", func(t *testing.T) {
		t.Parallel()
		exerciseSecret(t, newStore)
	})

	t.Run("Stats", func(t *testing.T) {
		t.Parallel()
		exerciseStats(t, newStore)
	})

	t.Run("ProviderLimit", func(t *testing.T) {
		t.Parallel()
		exerciseProviderLimit(t, newStore)
	})
}

// newSubmitParams returns a valid submission of tenant-a with a fresh id,
// key, document and dedup key. Tests change the fields they are about.
func newSubmitParams(t *testing.T) *store.JobSubmitParams {
	t.Helper()
	document := []byte("invoice " + newUUID(t))
	sum := sha256.Sum256(document)
	key := newUUID(t)
	return &store.JobSubmitParams{
		ID:              newUUID(t),
		Tenant:          "tenant-a",
		Method:          "/oncejob.v1.JobService/SubmitJob",
		IdempotencyKey:  "key-" + key,
		Fingerprint:     "fp-" + key,
		DedupKey:        "dedup:v1:" + key,
		Pipeline:        "invoice",
		PipelineVersion: 3,
		PromptVersion:   "p7",
		ModelProfile:    "fast",
		Document:        document,
		DocumentSHA256:  hex.EncodeToString(sum[:]),
		DocumentMedia:   "text/plain",
		DocumentName:    "invoice.txt",
		Params:          []byte(`{"currency":"EUR","language":"de"}`),
		Labels:          map[string]string{"team": "billing"},
	}
}

// submit creates a job and fails the test unless it was created.
func submit(t *testing.T, s store.Store, params *store.JobSubmitParams) *store.Job {
	t.Helper()
	res, err := s.JobSubmit(t.Context(), params)
	require.NoError(t, err)
	require.Equal(t, store.OutcomeCreated, res.Outcome)
	return res.Job
}

// requireJobIDs asserts the tenant's jobs, newest first.
func requireJobIDs(t *testing.T, s store.Store, tenant string, want ...string) {
	t.Helper()
	res, err := s.JobList(t.Context(), &store.JobListParams{Tenant: tenant})
	require.NoError(t, err)
	require.Equal(t, want, jobIDs(res.Jobs))
}

func jobIDs(jobs []*store.Job) []string {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

// newUUID returns a random UUID.
func newUUID(t *testing.T) string {
	t.Helper()
	return uuid.NewString()
}
