package storetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/jobkey"
	"github.com/oncejob/oncejob/store"
)

// exerciseRun is the conformance suite of RunStore and of submissions into
// a run.
func exerciseRun(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()

	type testBundle struct {
		store Store
		ctx   context.Context
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return &testBundle{store: newStore(t), ctx: t.Context()}
	}

	newRun := func(t *testing.T, b *testBundle) *store.Run {
		t.Helper()
		key := newUUID(t)
		res, err := b.store.RunCreate(b.ctx, &store.RunCreateParams{
			ID: newUUID(t), Tenant: "tenant-a", IdempotencyKey: "run-" + key, Fingerprint: "fp-" + key,
			Name: "nightly", Pipeline: "invoice", Params: []byte(`{"language":"de"}`), Labels: map[string]string{"batch": "7"},
		})
		require.NoError(t, err)
		require.False(t, res.Existing)
		return res.Run
	}

	// inRun is a new submission into run.
	inRun := func(t *testing.T, run *store.Run) *store.JobSubmitParams {
		t.Helper()
		p := newSubmitParams(t)
		p.RunID = run.ID
		return p
	}

	submitMany := func(t *testing.T, b *testBundle, jobs ...*store.JobSubmitParams) []store.JobSubmitItem {
		t.Helper()
		res, err := b.store.JobSubmitMany(b.ctx, &store.JobSubmitManyParams{Jobs: jobs})
		require.NoError(t, err)
		for _, item := range res.Items {
			require.NoError(t, item.Err)
		}
		return res.Items
	}

	progress := func(t *testing.T, b *testBundle, run *store.Run) store.RunProgress {
		t.Helper()
		got, err := b.store.RunGet(b.ctx, &store.RunGetParams{Tenant: run.Tenant, ID: run.ID, RecentSince: time.Now().Add(-time.Hour)})
		require.NoError(t, err)
		return got.Progress
	}

	t.Run("CreateIsIdempotentByKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		params := &store.RunCreateParams{
			ID: newUUID(t), Tenant: "tenant-a", IdempotencyKey: "run-1", Fingerprint: "fp-1",
			Name: "nightly", Pipeline: "invoice", ModelProfile: "fast", Params: []byte(`{"a":1}`), Labels: map[string]string{"x": "y"},
		}
		first, err := b.store.RunCreate(b.ctx, params)
		require.NoError(t, err)
		require.False(t, first.Existing)
		run := first.Run
		require.Equal(t, params.ID, run.ID)
		require.Equal(t, "nightly", run.Name)
		require.Equal(t, "invoice", run.Pipeline)
		require.Equal(t, "fast", run.ModelProfile)
		require.JSONEq(t, `{"a":1}`, string(run.Params))
		require.Equal(t, map[string]string{"x": "y"}, run.Labels)
		require.Nil(t, run.CancelledAt)
		require.Zero(t, run.Progress.Items)

		again := *params
		again.ID = newUUID(t)
		second, err := b.store.RunCreate(b.ctx, &again)
		require.NoError(t, err)
		require.True(t, second.Existing)
		require.Equal(t, run.ID, second.Run.ID)

		other := again
		other.Fingerprint = "fp-2"
		_, err = b.store.RunCreate(b.ctx, &other)
		require.ErrorIs(t, err, store.ErrIdempotencyKeyReused)

		elsewhere := again
		elsewhere.Tenant = "tenant-b"
		res, err := b.store.RunCreate(b.ctx, &elsewhere)
		require.NoError(t, err)
		require.False(t, res.Existing, "keys are scoped by tenant")

		_, err = b.store.RunGet(b.ctx, &store.RunGetParams{Tenant: "tenant-b", ID: run.ID})
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("BatchesOfARunCountItsOwnCalls", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		run := newRun(t, b)
		other := newRun(t, b)
		items := submitMany(t, b, inRun(t, run), inRun(t, run), inRun(t, other))
		mine1, mine2, theirs := items[0].Job, items[1].Job, items[2].Job

		journal := func(job *store.Job, key string, outcome store.LLMOutcome, errText string, cost int64) {
			t.Helper()
			a := store.LLMAttempt{JobID: job.ID, JobAttempt: 1, Stage: store.JobStageLLMDone, ProviderKey: key, Model: "m",
				Outcome: outcome, Error: errText, PriceClass: store.PriceClassBatch}
			if outcome == store.LLMOutcomeSucceeded {
				a.Billed, a.PromptTokens, a.CompletionTokens, a.CostMicros, a.ProviderRequestID = true, 10, 5, cost, "req-"+key
			}
			require.NoError(t, b.store.LLMAttemptRecord(b.ctx, &store.LLMAttemptRecordParams{Attempt: a}))
		}
		created := time.Now().Add(-time.Minute).Truncate(time.Second)
		expires := created.Add(24 * time.Hour)
		record := func(tag, id, status string) {
			t.Helper()
			require.NoError(t, b.store.ProviderBatchRecord(b.ctx, &store.ProviderBatchRecordParams{
				Tag: tag, BatchID: id, Status: status, CreatedAt: created, ExpiresAt: &expires,
			}))
		}
		// Batch 1 carries both calls of the run and one of another run; the
		// run's second call failed there and went into batch 2, which
		// answered it. Batch 3's tag was journaled but never created.
		journal(mine1, "k1", store.LLMOutcomeOutcomeUnknown, "provider batch t1", 0)
		journal(mine2, "k2", store.LLMOutcomeOutcomeUnknown, "provider batch t1", 0)
		journal(theirs, "k3", store.LLMOutcomeOutcomeUnknown, "provider batch t1", 0)
		record("t1", "batch_1", "in_progress")
		journal(mine1, "k1", store.LLMOutcomeSucceeded, "", 40)
		journal(theirs, "k3", store.LLMOutcomeSucceeded, "", 1000)
		journal(mine2, "k2", store.LLMOutcomeUnavailable, "the line failed", 0)
		record("t1", "batch_1", "completed")
		journal(mine2, "k2", store.LLMOutcomeOutcomeUnknown, "provider batch t2", 0)
		record("t2", "batch_2", "validating")
		journal(mine1, "k9", store.LLMOutcomeOutcomeUnknown, "provider batch t3", 0)

		got, err := b.store.RunBatchList(b.ctx, &store.RunBatchListParams{Tenant: run.Tenant, RunID: run.ID})
		require.NoError(t, err)
		require.Len(t, got, 2)
		first, second := got[0], got[1]
		if first.BatchID != "batch_1" {
			first, second = second, first
		}
		require.Equal(t, "batch_1", first.BatchID)
		require.Equal(t, "completed", first.Status)
		require.EqualValues(t, 2, first.Lines, "the run's two calls, not the other run's")
		require.EqualValues(t, 1, first.AnsweredLines, "the failed line was answered by batch 2")
		require.EqualValues(t, 40, first.CostMicros)
		require.True(t, first.CreatedAt.Equal(created), "%v", first.CreatedAt)
		require.NotNil(t, first.ExpiresAt)
		require.True(t, first.ExpiresAt.Equal(expires))

		require.Equal(t, "batch_2", second.BatchID)
		require.Equal(t, "validating", second.Status)
		require.EqualValues(t, 1, second.Lines)
		require.Zero(t, second.AnsweredLines)

		journal(mine2, "k2", store.LLMOutcomeSucceeded, "", 25)
		record("t2", "batch_2", "completed")
		got, err = b.store.RunBatchList(b.ctx, &store.RunBatchListParams{Tenant: run.Tenant, RunID: run.ID})
		require.NoError(t, err)
		for _, rb := range got {
			if rb.BatchID == "batch_2" {
				require.Equal(t, "completed", rb.Status)
				require.EqualValues(t, 1, rb.AnsweredLines)
				require.EqualValues(t, 25, rb.CostMicros)
			}
		}

		none, err := b.store.RunBatchList(b.ctx, &store.RunBatchListParams{Tenant: "tenant-b", RunID: run.ID})
		require.NoError(t, err)
		require.Empty(t, none, "another tenant sees nothing")
		none, err = b.store.RunBatchList(b.ctx, &store.RunBatchListParams{Tenant: run.Tenant, RunID: "not-a-uuid"})
		require.NoError(t, err)
		require.Empty(t, none)
	})

	t.Run("BatchesOfARunCountTheProvidersBills", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		run := newRun(t, b)
		other := newRun(t, b)
		items := submitMany(t, b, inRun(t, run), inRun(t, run), inRun(t, other))
		mine1, mine2, theirs := items[0].Job, items[1].Job, items[2].Job
		intent := func(job *store.Job, attempt int32, key, tag string) {
			t.Helper()
			require.NoError(t, b.store.LLMAttemptRecord(b.ctx, &store.LLMAttemptRecordParams{Attempt: store.LLMAttempt{
				JobID: job.ID, JobAttempt: attempt, Stage: store.JobStageLLMDone, ProviderKey: key, Model: "m",
				Outcome: store.LLMOutcomeOutcomeUnknown, Error: "provider batch " + tag, PriceClass: store.PriceClassBatch,
			}}))
			require.NoError(t, b.store.ProviderBatchRecord(b.ctx, &store.ProviderBatchRecordParams{
				Tag: tag, BatchID: "id-" + tag, Status: "completed", CreatedAt: time.Now(),
			}))
		}
		// Batch t1 carries the run's two calls and another run's; batch t2
		// a second bill of k1 (an attempt that sent it again).
		intent(mine1, 1, "k1", "t1")
		intent(mine2, 1, "k2", "t1")
		intent(theirs, 1, "k3", "t1")
		intent(mine1, 2, "k1", "t2")
		bills := func(tag string, keys ...string) {
			t.Helper()
			require.NoError(t, b.store.ProviderBatchBillsRecord(b.ctx, &store.ProviderBatchBillsRecordParams{Tag: tag, ProviderKeys: keys}))
		}
		bills("t1", "k1", "k3")
		bills("t1", "k1", "k2") // read again: k1 kept once
		bills("t2", "k1")
		bills("t2")

		got, err := b.store.RunBatchList(b.ctx, &store.RunBatchListParams{Tenant: run.Tenant, RunID: run.ID})
		require.NoError(t, err)
		billed := map[string]int64{}
		var sum int64
		for _, rb := range got {
			billed[rb.BatchID] = rb.BilledLines
			sum += rb.BilledLines
		}
		require.Equal(t, map[string]int64{"id-t1": 2, "id-t2": 1}, billed, "the run's calls only")
		require.EqualValues(t, 3, sum, "two calls, three bills: the double bill shows")
	})

	t.Run("ProviderBatchJobsAreTheJobsOfItsIntents", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		run := newRun(t, b)
		items := submitMany(t, b, inRun(t, run), inRun(t, run), inRun(t, run))
		a, c, other := items[0].Job, items[1].Job, items[2].Job
		tag, otherTag := newUUID(t), newUUID(t) // intents of other tests' batches share the table
		row := func(job *store.Job, key string, outcome store.LLMOutcome, msg string) {
			t.Helper()
			require.NoError(t, b.store.LLMAttemptRecord(b.ctx, &store.LLMAttemptRecordParams{Attempt: store.LLMAttempt{
				JobID: job.ID, JobAttempt: 1, Stage: store.JobStageLLMDone, ProviderKey: key, Model: "m",
				Outcome: outcome, Error: msg, PriceClass: store.PriceClassBatch,
			}}))
		}
		// a has two lines in the batch, c one; other's intent names
		// another batch, and its rows that are no intent name none.
		row(a, "ka1", store.LLMOutcomeOutcomeUnknown, store.BatchIntentPrefix+tag)
		row(a, "ka2", store.LLMOutcomeOutcomeUnknown, store.BatchIntentPrefix+tag)
		row(c, "kc", store.LLMOutcomeOutcomeUnknown, store.BatchIntentPrefix+tag)
		row(other, "ko", store.LLMOutcomeOutcomeUnknown, store.BatchIntentPrefix+otherTag)
		row(other, "ko", store.LLMOutcomeUnavailable, store.BatchIntentPrefix+tag)
		row(other, "ko2", store.LLMOutcomeOutcomeUnknown, "provider batch "+tag+" lost")

		jobs := func(tag string) map[string]store.JobStatus {
			t.Helper()
			got, err := b.store.ProviderBatchJobs(b.ctx, &store.ProviderBatchJobsParams{Tag: tag})
			require.NoError(t, err)
			out := map[string]store.JobStatus{}
			for _, j := range got {
				_, dup := out[j.JobID]
				require.False(t, dup, "a job once, however many lines it has: %s", j.JobID)
				out[j.JobID] = j.Status
			}
			return out
		}
		require.Equal(t, map[string]store.JobStatus{a.ID: store.JobStatusQueued, c.ID: store.JobStatusQueued}, jobs(tag))
		_, err := b.store.JobCancel(b.ctx, &store.JobCancelParams{Tenant: a.Tenant, ID: a.ID, Message: "test"})
		require.NoError(t, err)
		require.Equal(t, map[string]store.JobStatus{a.ID: store.JobStatusCancelled, c.ID: store.JobStatusQueued}, jobs(tag))
		require.Equal(t, map[string]store.JobStatus{other.ID: store.JobStatusQueued}, jobs(otherTag))
		require.Empty(t, jobs(newUUID(t)), "a tag no intent names")
	})

	t.Run("StaleProviderBatchesAreListed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tag := newUUID(t) // the batches table is shared by the store's runs
		for i, status := range []string{"in_progress", "completed", "validating", "cancelled", "finalizing"} {
			require.NoError(t, b.store.ProviderBatchRecord(b.ctx, &store.ProviderBatchRecordParams{
				Tag: fmt.Sprintf("%s-%d", tag, i), BatchID: fmt.Sprintf("id-%d", i), Status: status, CreatedAt: time.Now(),
			}))
		}
		stale := func(before time.Time, limit int) []string {
			t.Helper()
			got, err := b.store.ProviderBatchListStale(b.ctx, &store.ProviderBatchListStaleParams{StaleBefore: before, Limit: limit})
			require.NoError(t, err)
			var ids []string
			for _, pb := range got {
				if strings.HasPrefix(pb.Tag, tag) {
					ids = append(ids, pb.BatchID)
				}
			}
			return ids
		}
		require.Empty(t, stale(time.Now().Add(-time.Minute), 100), "every record touched just now")
		require.ElementsMatch(t, []string{"id-0", "id-2", "id-4"}, stale(time.Now().Add(time.Minute), 100), "the unfinished ones")
		one, err := b.store.ProviderBatchListStale(b.ctx, &store.ProviderBatchListStaleParams{StaleBefore: time.Now().Add(time.Minute), Limit: 1})
		require.NoError(t, err)
		require.Len(t, one, 1, "at most Limit")
	})

	t.Run("ProviderBatchIsKept", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, err := b.store.RunCreate(b.ctx, &store.RunCreateParams{
			ID: newUUID(t), Tenant: "tenant-a", IdempotencyKey: "run-batch", Fingerprint: "fp", Name: "n", ProviderBatch: true,
		})
		require.NoError(t, err)
		require.True(t, res.Run.ProviderBatch)
		got, err := b.store.RunGet(b.ctx, &store.RunGetParams{Tenant: "tenant-a", ID: res.Run.ID, WithoutProgress: true})
		require.NoError(t, err)
		require.True(t, got.ProviderBatch)
		list, err := b.store.RunList(b.ctx, &store.RunListParams{Tenant: "tenant-a"})
		require.NoError(t, err)
		require.Len(t, list.Runs, 1)
		require.True(t, list.Runs[0].ProviderBatch)
		plain, err := b.store.RunCreate(b.ctx, &store.RunCreateParams{
			ID: newUUID(t), Tenant: "tenant-a", IdempotencyKey: "run-plain", Fingerprint: "fp", Name: "n",
		})
		require.NoError(t, err)
		require.False(t, plain.Run.ProviderBatch)
	})

	t.Run("ItemsJoinWithTheirJobAndCountOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		run := newRun(t, b)

		// Work done before the run: a success under another key (its
		// computation is reused: deduplicated), and a key submitted
		// outside the run (reused: existing).
		done := jobIn(t, b.store, store.JobStatusSucceeded)
		outside := submit(t, b.store, newSubmitParams(t))

		created := []*store.JobSubmitParams{inRun(t, run), inRun(t, run), inRun(t, run)}
		created[2].Priority = store.JobPriorityInteractive // asked for: kept
		dedup := inRun(t, run)
		dedup.DedupKey = done.DedupKey
		existing := inRun(t, run)
		existing.IdempotencyKey, existing.Fingerprint = outside.IdempotencyKey, "fp-"+outside.IdempotencyKey[len("key-"):]
		items := submitMany(t, b, append(slices.Clone(created), dedup, existing)...)
		for i := range created {
			require.Equal(t, store.OutcomeCreated, items[i].Outcome)
		}
		require.Equal(t, store.OutcomeDeduplicated, items[3].Outcome)
		require.Equal(t, store.OutcomeExisting, items[4].Outcome)
		require.Equal(t, outside.ID, items[4].Job.ID)
		// A created job knows its run and, unless asked otherwise, is
		// batch work; a job from outside keeps its own (none, interactive).
		for i, want := range []store.JobPriority{store.JobPriorityBatch, store.JobPriorityBatch, store.JobPriorityInteractive} {
			require.Equal(t, run.ID, items[i].Job.RunID)
			require.Equal(t, want, items[i].Job.Priority)
		}
		require.Empty(t, items[4].Job.RunID)
		require.Equal(t, store.JobPriorityInteractive, items[4].Job.Priority)

		p := progress(t, b, run)
		require.EqualValues(t, 5, p.Items)
		require.EqualValues(t, 2, p.Reused)
		require.EqualValues(t, 4, p.ByStatus[store.JobStatusQueued], "three created and the outside job")
		require.EqualValues(t, 1, p.ByStatus[store.JobStatusSucceeded])
		require.EqualValues(t, 1, p.Terminal())

		// The same items again (a resumed client): nothing new joins, and
		// the run's record answers them.
		keys := []string{created[0].IdempotencyKey, existing.IdempotencyKey, "not-in-run"}
		found, err := b.store.RunItemGetMany(b.ctx, &store.RunItemGetManyParams{Tenant: run.Tenant, RunID: run.ID, Keys: keys})
		require.NoError(t, err)
		require.Len(t, found, 2)
		byKey := map[string]*store.RunItem{}
		for _, it := range found {
			byKey[it.Key] = it
		}
		require.Equal(t, store.RunItemCreated, byKey[created[0].IdempotencyKey].Outcome)
		require.Equal(t, created[0].ID, byKey[created[0].IdempotencyKey].Job.ID)
		require.Equal(t, created[0].Fingerprint, byKey[created[0].IdempotencyKey].Fingerprint)
		require.Equal(t, store.RunItemExisting, byKey[existing.IdempotencyKey].Outcome)

		resubmit := *created[0]
		resubmit.ID = newUUID(t)
		again := submitMany(t, b, &resubmit)
		require.Equal(t, store.OutcomeExisting, again[0].Outcome)
		require.EqualValues(t, 5, progress(t, b, run).Items)

		// Another tenant reads none of it.
		found, err = b.store.RunItemGetMany(b.ctx, &store.RunItemGetManyParams{Tenant: "tenant-b", RunID: run.ID, Keys: keys})
		require.NoError(t, err)
		require.Empty(t, found)

		// A second run of the same keys reuses every item: the jobs are
		// the first run's.
		second := newRun(t, b)
		var same []*store.JobSubmitParams
		for _, c := range created {
			p := *c
			p.ID, p.RunID = newUUID(t), second.ID
			same = append(same, &p)
		}
		for i, item := range submitMany(t, b, same...) {
			require.Equal(t, store.OutcomeExisting, item.Outcome)
			require.Equal(t, created[i].ID, item.Job.ID)
		}
		p2 := progress(t, b, second)
		require.EqualValues(t, 3, p2.Items)
		require.EqualValues(t, 3, p2.Reused)

		// ListJobs by run: the run's jobs, the reused ones too, and only
		// those.
		list, err := b.store.JobList(b.ctx, &store.JobListParams{Tenant: run.Tenant, RunID: run.ID})
		require.NoError(t, err)
		var want []string
		for _, it := range items {
			want = append(want, it.Job.ID)
		}
		require.ElementsMatch(t, want, jobIDs(list.Jobs))
		list, err = b.store.JobList(b.ctx, &store.JobListParams{Tenant: run.Tenant, RunID: second.ID, Status: store.JobStatusQueued, Limit: 2})
		require.NoError(t, err)
		require.Len(t, list.Jobs, 2)
		require.NotNil(t, list.Next)

		// The claim that hands the jobs to a worker says the same.
		claimed, err := b.store.JobClaim(b.ctx, &store.JobClaimParams{Owner: "w", Limit: 10, LeaseDuration: time.Minute})
		require.NoError(t, err)
		require.Len(t, claimed, 4)
		for _, j := range claimed {
			got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: j.Tenant, ID: j.ID})
			require.NoError(t, err)
			require.Equal(t, got.RunID, j.RunID)
			require.Equal(t, got.Priority, j.Priority)
		}
	})

	t.Run("ProgressCountsUsageOfComputedItemsAndGrowsItsSeq", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		run := newRun(t, b)
		sub := inRun(t, run)
		job := submittedJobIn(t, b.store, sub, store.JobStatusSucceeded)
		before := progress(t, b, run)
		require.EqualValues(t, 1, before.Items)
		require.EqualValues(t, 1, before.FinishedRecently)
		require.Positive(t, before.Seq)

		// A reused item adds to the seq (it joined) but not to the usage
		// or the recent finishes.
		dedup := inRun(t, run)
		dedup.DedupKey = job.DedupKey
		submitMany(t, b, dedup)
		after := progress(t, b, run)
		require.Greater(t, after.Seq, before.Seq)
		require.EqualValues(t, 1, after.FinishedRecently)
		require.EqualValues(t, 1, after.Reused)
		require.EqualValues(t, 2, after.Terminal())

		got, err := b.store.RunGet(b.ctx, &store.RunGetParams{Tenant: run.Tenant, ID: run.ID, RecentSince: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		require.Zero(t, got.Progress.FinishedRecently)
	})

	t.Run("RetryFailuresReplaysExactlyTheFailedOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		run := newRun(t, b)
		var failed, others []*store.Job
		for range 3 {
			failed = append(failed, submittedJobIn(t, b.store, inRun(t, run), store.JobStatusFailed))
			failed = append(failed, submittedJobIn(t, b.store, inRun(t, run), store.JobStatusDeadLettered))
		}
		for _, st := range []store.JobStatus{store.JobStatusSucceeded, store.JobStatusQueued, store.JobStatusRunning, store.JobStatusCancelled} {
			others = append(others, submittedJobIn(t, b.store, inRun(t, run), st))
		}
		outsider := jobIn(t, b.store, store.JobStatusFailed) // not in the run

		idem := newIdempotency(t, "RetryRunFailures")
		who := &store.Actor{KeyPrefix: "ojk_aaaaaaaaaaaa", Role: store.RoleOperator, RPC: "/oncejob.v1.RunService/RetryRunFailures"}
		params := &store.RunRetryFailuresParams{Tenant: run.Tenant, RunID: run.ID, Message: store.RunRetryMessage("provider back"), Idempotency: *idem, Actor: who}
		res, err := b.store.RunRetryFailures(b.ctx, params)
		require.NoError(t, err)
		require.Equal(t, 6, res.Count)
		require.False(t, res.Replayed)
		for _, j := range failed {
			got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: j.Tenant, ID: j.ID})
			require.NoError(t, err)
			require.Equal(t, store.JobStatusQueued, got.Status)
			require.Equal(t, j.Stage, got.Stage, "resumes from its checkpoint")
			require.Nil(t, got.Error)
			events := requireConsecutiveEvents(t, b.store, got)
			require.Equal(t, "replayed by RetryRunFailures: provider back", events[len(events)-1].Message)
			require.Equal(t, who, events[len(events)-1].Actor, "the audit record, on each job's event")
		}
		for _, j := range append(slices.Clone(others), outsider) {
			got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: j.Tenant, ID: j.ID})
			require.NoError(t, err)
			require.Equal(t, j.Status, got.Status, "untouched")
			require.Equal(t, j.UpdatedAt, got.UpdatedAt, "untouched")
		}

		// The key again: the first answer, nothing replayed, even after
		// the jobs failed again.
		jobIn(t, b.store, store.JobStatusFailed)
		again, err := b.store.RunRetryFailures(b.ctx, params)
		require.NoError(t, err)
		require.Equal(t, 6, again.Count)
		require.True(t, again.Replayed)
		require.EqualValues(t, 7, progress(t, b, run).ByStatus[store.JobStatusQueued], "six replayed, one queued")

		other := newRun(t, b)
		wrong := *params
		wrong.RunID = other.ID
		_, err = b.store.RunRetryFailures(b.ctx, &wrong)
		require.ErrorIs(t, err, store.ErrIdempotencyKeyReused)

		missing := *params
		missing.RunID, missing.Idempotency = newUUID(t), *newIdempotency(t, "RetryRunFailures")
		_, err = b.store.RunRetryFailures(b.ctx, &missing)
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("CancelStopsWhatTheRunCreatedOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		run := newRun(t, b)
		queued := submittedJobIn(t, b.store, inRun(t, run), store.JobStatusQueued)
		running := submittedJobIn(t, b.store, inRun(t, run), store.JobStatusRunning)
		done := submittedJobIn(t, b.store, inRun(t, run), store.JobStatusSucceeded)
		outside := submit(t, b.store, newSubmitParams(t))
		reuse := inRun(t, run)
		reuse.IdempotencyKey, reuse.Fingerprint = outside.IdempotencyKey, "fp-"+outside.IdempotencyKey[len("key-"):]
		require.Equal(t, store.OutcomeExisting, submitMany(t, b, reuse)[0].Outcome)

		who := &store.Actor{KeyPrefix: "sha256:0123abcd", Role: store.RoleOperator, RPC: "/oncejob.v1.RunService/CancelRun"}
		res, err := b.store.RunCancel(b.ctx, &store.RunCancelParams{Tenant: run.Tenant, RunID: run.ID, Message: store.RunCancelMessage(""), Actor: who})
		require.NoError(t, err)
		require.Equal(t, 2, res.Count)
		cancelledEvents := requireConsecutiveEvents(t, b.store, queued)
		require.Equal(t, who, cancelledEvents[len(cancelledEvents)-1].Actor)
		got, err := b.store.RunGet(b.ctx, &store.RunGetParams{Tenant: run.Tenant, ID: run.ID})
		require.NoError(t, err)
		require.NotNil(t, got.CancelledAt)

		status := func(j *store.Job) *store.Job {
			g, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: j.Tenant, ID: j.ID})
			require.NoError(t, err)
			return g
		}
		require.Equal(t, store.JobStatusCancelled, status(queued).Status)
		require.True(t, status(running).CancelRequested)
		require.Equal(t, store.JobStatusSucceeded, status(done).Status)
		require.Equal(t, store.JobStatusQueued, status(outside).Status, "reused work is not the run's to cancel")

		again, err := b.store.RunCancel(b.ctx, &store.RunCancelParams{Tenant: run.Tenant, RunID: run.ID})
		require.NoError(t, err)
		require.Zero(t, again.Count)
		later, err := b.store.RunGet(b.ctx, &store.RunGetParams{Tenant: run.Tenant, ID: run.ID})
		require.NoError(t, err)
		require.Equal(t, got.CancelledAt, later.CancelledAt, "the first time stays")

		_, err = b.store.RunCancel(b.ctx, &store.RunCancelParams{Tenant: "tenant-b", RunID: run.ID})
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("DefaultsAreStoredOnceAndReadMerged", func(t *testing.T) {
		t.Parallel()
		exerciseRunDefaults(t, setup(t).store)
	})

	t.Run("ListNewestFirstInPages", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var ids []string
		for range 3 {
			ids = append([]string{newRun(t, b).ID}, ids...)
		}
		page, err := b.store.RunList(b.ctx, &store.RunListParams{Tenant: "tenant-a", Limit: 2})
		require.NoError(t, err)
		require.Len(t, page.Runs, 2)
		require.NotNil(t, page.Next)
		rest, err := b.store.RunList(b.ctx, &store.RunListParams{Tenant: "tenant-a", Limit: 2, After: page.Next})
		require.NoError(t, err)
		require.Nil(t, rest.Next)
		require.Equal(t, ids, []string{page.Runs[0].ID, page.Runs[1].ID, rest.Runs[0].ID})
	})
}

// runDefaults are a run's params with names of every length and escape
// either store orders and quotes its own way, and nested values.
var runDefaults = map[string]any{
	"a": "run", "bb": []any{1.5, "x"}, "é": "é", "\"q": true, "z\n": nil, "tab\t": 3,
	"nested": map[string]any{"k": map[string]any{"y": 1, "x": "two words"}}, "language": "de",
}

// exerciseRunDefaults: a run's params and labels are kept once, on its
// row; the job of each of its items, submitted with the item's own, reads
// back from every read with the run's under its own (the item's win),
// byte for byte as a job submitted with the merged ones (docs/
// architecture.md, "Runs"). A row that holds the merged ones (written
// before) reads the same. An answer to a submission into the run leaves
// params and labels out.
func exerciseRunDefaults(t *testing.T, s Store) {
	ctx := t.Context()
	canonical := func(v map[string]any) []byte {
		b, err := jobkey.Canonical(v)
		require.NoError(t, err)
		return b
	}
	runLabels := map[string]string{"batch": "7", "team": "ops"}
	res, err := s.RunCreate(ctx, &store.RunCreateParams{
		ID: newUUID(t), Tenant: "tenant-a", IdempotencyKey: "run-defaults", Fingerprint: "fp",
		Name: "nightly", Pipeline: "invoice", Params: canonical(runDefaults), Labels: runLabels,
	})
	require.NoError(t, err)
	run := res.Run

	own := map[string]any{"language": "fr", "page": 7, "ü": "own"}
	merged := maps.Clone(runDefaults)
	maps.Copy(merged, own)
	ownLabels := map[string]string{"team": "search", "item": "7"}
	mergedLabels := map[string]string{"batch": "7", "team": "search", "item": "7"}

	item := newSubmitParams(t)
	item.RunID, item.Params, item.Labels = run.ID, canonical(own), ownLabels
	copied := newSubmitParams(t) // a row of before: the merged values copied in
	copied.RunID, copied.Params, copied.Labels = run.ID, canonical(merged), mergedLabels
	control := newSubmitParams(t) // no run: the merged values are its own
	control.Params, control.Labels = canonical(merged), mergedLabels
	submitted, err := s.JobSubmitMany(ctx, &store.JobSubmitManyParams{Jobs: []*store.JobSubmitParams{item, copied}})
	require.NoError(t, err)
	for _, it := range submitted.Items {
		require.NoError(t, it.Err)
		require.Nil(t, it.Job.Params, "an answer into a run carries no params")
		require.Nil(t, it.Job.Labels)
	}
	want, err := s.JobSubmit(ctx, control)
	require.NoError(t, err)
	require.Equal(t, mergedLabels, want.Job.Labels)

	requireMerged := func(what string, j *store.Job) {
		t.Helper()
		require.NotNil(t, j, what)
		require.Equal(t, string(want.Job.Params), string(j.Params), "%s: params", what)
		require.Equal(t, mergedLabels, j.Labels, "%s: labels", what)
	}
	for _, p := range []*store.JobSubmitParams{item, copied} {
		got, err := s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: "tenant-a", ID: p.ID})
		require.NoError(t, err)
		requireMerged("JobGetByID", got)
		plain := *p
		plain.RunID = "" // the key replayed outside the run
		again, err := s.JobSubmit(ctx, &plain)
		require.NoError(t, err)
		requireMerged("JobSubmit EXISTING", again.Job)
		byKey, err := s.JobGetByIdempotencyKey(ctx, &store.JobGetByIdempotencyKeyParams{Tenant: p.Tenant, Method: p.Method, IdempotencyKey: p.IdempotencyKey, Fingerprint: p.Fingerprint})
		require.NoError(t, err)
		requireMerged("JobGetByIdempotencyKey", byKey.Job)
	}
	list, err := s.JobList(ctx, &store.JobListParams{Tenant: "tenant-a", RunID: run.ID})
	require.NoError(t, err)
	require.Len(t, list.Jobs, 2)
	for _, j := range list.Jobs {
		requireMerged("JobList", j)
	}
	var changes []*store.JobChange
	require.Eventually(t, func() bool { // the log lists a change once no transaction before it is open
		changes, err = s.JobChangeList(ctx, &store.JobChangeListParams{Tenant: "tenant-a"})
		require.NoError(t, err)
		return len(changes) == 3
	}, watchWait, 5*time.Millisecond)
	for _, c := range changes {
		requireMerged("JobChangeList", c.Job)
	}
	claimed, err := s.JobClaim(ctx, &store.JobClaimParams{Owner: "w", Limit: 10, LeaseDuration: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, 3)
	for _, j := range claimed {
		requireMerged("JobClaim", j)
	}
	cancelled, err := s.JobCancel(ctx, &store.JobCancelParams{Tenant: "tenant-a", ID: item.ID, Message: "stop"})
	require.NoError(t, err)
	requireMerged("JobCancel", cancelled.Job)
	found, err := s.RunItemGetMany(ctx, &store.RunItemGetManyParams{Tenant: "tenant-a", RunID: run.ID, Keys: []string{item.IdempotencyKey}})
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Nil(t, found[0].Job.Params, "a run's answers carry no params")
}
