package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// engineLease is long enough that no lease expires during a test unless the
// test means it to.
const engineLease = time.Minute

// exerciseEngine is the conformance suite of store.EngineStore.
func exerciseEngine(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()

	type testBundle struct {
		store  Store
		engine store.EngineStore
		ctx    context.Context
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		s := newStore(t)
		return &testBundle{store: s, engine: s, ctx: t.Context()}
	}

	// submitAndClaim submits a job and claims it for owner. It expects the
	// job to be the store's only runnable one.
	submitAndClaim := func(t *testing.T, b *testBundle, params *store.JobSubmitParams, owner string) (*store.Job, store.Lease) {
		t.Helper()
		submitted := submit(t, b.store, params)
		job := claimOne(t, b.engine, owner, engineLease)
		require.Equal(t, submitted.ID, job.ID)
		return job, leaseOf(job)
	}

	t.Run("JobClaim", func(t *testing.T) {
		t.Parallel()

		t.Run("ConcurrentClaimersClaimEachJobOnce", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			const jobs, claimers, limit = 100, 8, 5
			submitted := make(map[string]*store.Job, jobs)
			for range jobs {
				job := submit(t, b.store, newSubmitParams(t))
				submitted[job.ID] = job
			}

			var (
				mu      sync.Mutex
				claimed = make(map[string][]*store.Job)
				errs    = make([]error, claimers)
				wg      sync.WaitGroup
			)
			start := make(chan struct{})
			for i := range claimers {
				owner := fmt.Sprintf("worker-%d", i)
				wg.Go(func() {
					<-start
					for {
						got, err := b.engine.JobClaim(b.ctx, &store.JobClaimParams{Owner: owner, Limit: limit, LeaseDuration: engineLease})
						if err != nil {
							errs[i] = err
							return
						}
						if len(got) == 0 {
							return
						}
						if len(got) > limit {
							errs[i] = fmt.Errorf("claimed %d jobs, limit %d", len(got), limit)
							return
						}
						mu.Lock()
						for _, job := range got {
							claimed[job.ID] = append(claimed[job.ID], job)
						}
						mu.Unlock()
					}
				})
			}
			close(start)
			wg.Wait()
			for _, err := range errs {
				require.NoError(t, err)
			}

			require.Len(t, claimed, jobs)
			for id, claims := range claimed {
				require.Contains(t, submitted, id)
				require.Len(t, claims, 1, "job %s claimed more than once", id)
				job := claims[0]
				require.Equal(t, store.JobStatusRunning, job.Status)
				require.Equal(t, int32(1), job.Attempt)
				require.Equal(t, int32(1), job.BudgetAttempts)
				require.NotEmpty(t, job.LeaseOwner)
				require.NotNil(t, job.LeaseUntil)
				require.True(t, job.LeaseUntil.After(time.Now()), "lease ends in the past")

				got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: id})
				require.NoError(t, err)
				require.Equal(t, store.JobStatusQueued, job.ClaimedFrom)
				got.ClaimedFrom = job.ClaimedFrom // the claim's, not the job's
				require.Equal(t, job, got)

				events := requireConsecutiveEvents(t, b.store, job)
				require.Len(t, events, 2)
				require.Equal(t, store.JobStatusRunning, events[1].Status)
				require.Equal(t, int32(1), events[1].Attempt)
				require.Equal(t, job.Stage, events[1].Stage)
			}

			none, err := b.engine.JobClaim(b.ctx, &store.JobClaimParams{Owner: "late", Limit: limit, LeaseDuration: engineLease})
			require.NoError(t, err)
			require.Empty(t, none)
		})

		t.Run("OldestFirstUpToLimit", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			var ids []string
			for range 3 {
				ids = append(ids, submit(t, b.store, newSubmitParams(t)).ID)
			}
			first, err := b.engine.JobClaim(b.ctx, &store.JobClaimParams{Owner: "w", Limit: 2, LeaseDuration: engineLease})
			require.NoError(t, err)
			require.Equal(t, ids[:2], jobIDs(first))
			second, err := b.engine.JobClaim(b.ctx, &store.JobClaimParams{Owner: "w", Limit: 2, LeaseDuration: engineLease})
			require.NoError(t, err)
			require.Equal(t, ids[2:], jobIDs(second))
		})

		t.Run("RetryWaitIsClaimableOnlyAfterRunAfter", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			// Margins of an hour keep the test independent of clock skew
			// between this process and the database.
			later, lateLease := submitAndClaim(t, b, newSubmitParams(t), "w")
			due, dueLease := submitAndClaim(t, b, newSubmitParams(t), "w")
			dueAt := time.Now().Add(-time.Hour)
			for _, step := range []struct {
				lease    store.Lease
				runAfter time.Time
			}{
				{lateLease, time.Now().Add(time.Hour)},
				{dueLease, dueAt},
			} {
				_, err := b.engine.JobTransition(b.ctx, &store.JobTransitionParams{
					Lease: step.lease, To: store.JobStatusRetryWait, RunAfter: &step.runAfter, Message: "backing off",
				})
				require.NoError(t, err)
			}

			got, err := b.engine.JobClaim(b.ctx, &store.JobClaimParams{Owner: "w2", Limit: 10, LeaseDuration: engineLease})
			require.NoError(t, err)
			require.Equal(t, []string{due.ID}, jobIDs(got))
			require.Equal(t, int32(2), got[0].Attempt)
			require.Equal(t, int32(2), got[0].BudgetAttempts)
			require.Nil(t, got[0].RunAfter)
			require.Equal(t, "w2", got[0].LeaseOwner)
			events := requireConsecutiveEvents(t, b.store, got[0])
			require.Len(t, events, 4) // queued, claimed, retry_wait, claimed
			require.Equal(t, store.JobStatusRunning, events[3].Status)
			// The retry_wait event says when the job is tried next; no other
			// event does.
			require.NotNil(t, events[2].NextAttemptAt)
			require.WithinDuration(t, dueAt, *events[2].NextAttemptAt, time.Millisecond)
			for _, i := range []int{0, 1, 3} {
				require.Nil(t, events[i].NextAttemptAt, "event %d", i)
			}
			require.Equal(t, int32(2), events[3].Attempt)

			stillWaiting, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: later.Tenant, ID: later.ID})
			require.NoError(t, err)
			require.Equal(t, store.JobStatusRetryWait, stillWaiting.Status)

			// And a RunAfter that passes: a claim that runs at the time
			// (an injected Now) sees it due, one a moment before does not.
			b = setup(t)
			soon, soonLease := submitAndClaim(t, b, newSubmitParams(t), "w")
			runAfter := time.Now().Add(time.Hour)
			_, err = b.engine.JobTransition(b.ctx, &store.JobTransitionParams{
				Lease: soonLease, To: store.JobStatusRetryWait, RunAfter: &runAfter,
			})
			require.NoError(t, err)
			require.Empty(t, claimAt(t, b.engine, "w3", runAfter.Add(-time.Millisecond)))
			reclaimed := claimAt(t, b.engine, "w3", runAfter)
			require.Equal(t, []string{soon.ID}, jobIDs(reclaimed))
			require.Equal(t, int32(2), reclaimed[0].Attempt)
		})

		t.Run("OutcomeUnknownIsClaimedOnlyWhenItsRunAfterPassed", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
			var due *store.Job
			var waiting []*store.Job
			for _, runAfter := range []*time.Time{nil, &future, &past} { // the claimable one last, out of submitAndClaim's way
				_, lease := submitAndClaim(t, b, newSubmitParams(t), "w")
				moved, err := b.engine.JobTransition(b.ctx, &store.JobTransitionParams{
					Lease: lease, To: store.JobStatusOutcomeUnknown, RunAfter: runAfter, Message: "timed out after sending",
				})
				require.NoError(t, err)
				require.Equal(t, store.JobStatusOutcomeUnknown, moved.Status)
				if runAfter == nil {
					require.Nil(t, moved.RunAfter)
				} else {
					require.NotNil(t, moved.RunAfter)
					require.WithinDuration(t, *runAfter, *moved.RunAfter, time.Millisecond)
				}
				if runAfter == &past {
					due = moved
				} else {
					waiting = append(waiting, moved)
				}
			}

			got, err := b.engine.JobClaim(b.ctx, &store.JobClaimParams{Owner: "reconciler", Limit: 10, LeaseDuration: engineLease})
			require.NoError(t, err)
			require.Equal(t, []string{due.ID}, jobIDs(got))
			require.Equal(t, store.JobStatusRunning, got[0].Status)
			require.Equal(t, int32(2), got[0].Attempt)
			require.Nil(t, got[0].RunAfter)
			events := requireConsecutiveEvents(t, b.store, got[0])
			require.Len(t, events, 4) // queued, claimed, outcome_unknown, reconciling
			require.Equal(t, store.JobStatusRunning, events[3].Status)
			require.Equal(t, "reconciling an unknown outcome", events[3].Message)

			for _, job := range waiting {
				still, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
				require.NoError(t, err)
				require.Equal(t, job, still)
			}
		})

		t.Run("ExpiredLeaseIsTakenOverAndFencesTheOldOwner", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			// The claims run at injected times around the lease's end, so
			// the lease expires without the test waiting for it, and the
			// times come from the lease itself: no clock skew between this
			// process and the database matters.
			submitted := submit(t, b.store, newSubmitParams(t))
			first := claimOne(t, b.engine, "worker-a", engineLease)
			require.Equal(t, submitted.ID, first.ID)
			oldLease := leaseOf(first)
			require.Empty(t, claimAt(t, b.engine, "worker-b", first.LeaseUntil.Add(-time.Millisecond)), "taken over before the lease ended")

			takenOver := claimAt(t, b.engine, "worker-b", *first.LeaseUntil)
			require.Len(t, takenOver, 1)
			taken := takenOver[0]
			require.Equal(t, first.ID, taken.ID)
			require.Equal(t, store.JobStatusQueued, first.ClaimedFrom)
			require.Equal(t, store.JobStatusRunning, taken.ClaimedFrom, "a takeover is a claim from running")
			taken.ClaimedFrom = "" // a claim's alone, not the job's
			require.Equal(t, store.JobStatusRunning, taken.Status)
			require.Equal(t, int32(2), taken.Attempt)
			require.Equal(t, int32(2), taken.BudgetAttempts)
			require.Equal(t, "worker-b", taken.LeaseOwner)
			require.WithinDuration(t, first.LeaseUntil.Add(engineLease), *taken.LeaseUntil, time.Millisecond, "the new lease runs from the claim's Now")
			events := requireConsecutiveEvents(t, b.store, taken)
			require.Len(t, events, 3)
			require.Equal(t, store.JobStatusRunning, events[2].Status)
			require.Equal(t, int32(2), events[2].Attempt)
			require.Contains(t, events[2].Message, "worker-a")

			err := CheckpointWrite(b.ctx, b.engine, &CheckpointWriteParams{
				Lease: oldLease, Stage: store.JobStageTextExtracted, Chunk: -1, StageKey: "stage:v1:x",
				CodeVersion: "1", Output: []byte("text"), AdvanceStage: true, Message: "text extracted",
			})
			require.ErrorIs(t, err, store.ErrLeaseLost)
			_, err = heartbeat(b.ctx, b.engine, &heartbeatParams{Lease: oldLease, LeaseDuration: engineLease})
			require.ErrorIs(t, err, store.ErrLeaseLost)
			_, err = b.engine.JobTransition(b.ctx, &store.JobTransitionParams{
				Lease: oldLease, To: store.JobStatusFailed, Error: &store.JobError{Code: "x", Message: "y"},
			})
			require.ErrorIs(t, err, store.ErrLeaseLost)
			_, err = Publish(b.ctx, b.engine, &store.JobPublishParams{
				Lease: oldLease, Output: []byte(`{}`), Message: "published",
			})
			require.ErrorIs(t, err, store.ErrLeaseLost)

			got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: taken.Tenant, ID: taken.ID})
			require.NoError(t, err)
			require.Equal(t, taken, got)
			require.Equal(t, events, requireConsecutiveEvents(t, b.store, taken))
			checkpoints, err := b.engine.CheckpointList(b.ctx, &store.CheckpointListParams{JobID: taken.ID})
			require.NoError(t, err)
			require.Empty(t, checkpoints)
			outbox, err := b.engine.OutboxList(b.ctx, &store.OutboxListParams{JobID: taken.ID})
			require.NoError(t, err)
			require.Empty(t, outbox)

			// The new owner's lease holds.
			_, err = heartbeat(b.ctx, b.engine, &heartbeatParams{Lease: leaseOf(taken), LeaseDuration: engineLease})
			require.NoError(t, err)
		})
	})

	t.Run("JobHeartbeat", func(t *testing.T) {
		t.Parallel()

		t.Run("ExtendsTheLease", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			submitted := submit(t, b.store, newSubmitParams(t))
			job := claimOne(t, b.engine, "worker-a", engineLease)
			require.Equal(t, submitted.ID, job.ID)

			// A heartbeat just before the lease ends (an injected Now)
			// extends it from then: past the first lease's end nobody takes
			// the job; past the extended one it is taken over.
			beat := job.LeaseUntil.Add(-time.Second)
			res, err := heartbeat(b.ctx, b.engine, &heartbeatParams{Lease: leaseOf(job), LeaseDuration: engineLease, Now: &beat})
			require.NoError(t, err)
			require.False(t, res.CancelRequested)

			got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			require.Equal(t, "worker-a", got.LeaseOwner)
			require.NotNil(t, got.LeaseUntil)
			require.WithinDuration(t, beat.Add(engineLease), *got.LeaseUntil, time.Millisecond, "lease not extended")
			require.Len(t, requireConsecutiveEvents(t, b.store, job), 2) // a heartbeat is no transition

			require.Empty(t, claimAt(t, b.engine, "worker-b", job.LeaseUntil.Add(time.Second)))
			taken := claimAt(t, b.engine, "worker-b", *got.LeaseUntil)
			require.Equal(t, []string{job.ID}, jobIDs(taken))
		})

		t.Run("AnotherOwnerOrAttemptIsLeaseLost", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			_, lease := submitAndClaim(t, b, newSubmitParams(t), "worker-a")
			for _, other := range []store.Lease{
				{JobID: lease.JobID, Owner: "worker-b", Attempt: lease.Attempt},
				{JobID: lease.JobID, Owner: lease.Owner, Attempt: lease.Attempt + 1},
				{JobID: newUUID(t), Owner: lease.Owner, Attempt: lease.Attempt},
				{JobID: "not-a-uuid", Owner: lease.Owner, Attempt: lease.Attempt},
			} {
				_, err := heartbeat(b.ctx, b.engine, &heartbeatParams{Lease: other, LeaseDuration: engineLease})
				require.ErrorIs(t, err, store.ErrLeaseLost, "lease %+v", other)
			}
		})
	})

	t.Run("DocumentGet", func(t *testing.T) {
		t.Parallel()

		t.Run("ReturnsTheTenantsDocument", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			params := newSubmitParams(t)
			submit(t, b.store, params)
			data, err := b.engine.DocumentGet(b.ctx, &store.DocumentGetParams{Tenant: params.Tenant, SHA256: params.DocumentSHA256})
			require.NoError(t, err)
			require.Equal(t, params.Document, data)

			_, err = b.engine.DocumentGet(b.ctx, &store.DocumentGetParams{Tenant: "tenant-b", SHA256: params.DocumentSHA256})
			require.ErrorIs(t, err, store.ErrNotFound)
			_, err = b.engine.DocumentGet(b.ctx, &store.DocumentGetParams{Tenant: params.Tenant, SHA256: "00"})
			require.ErrorIs(t, err, store.ErrNotFound)
		})
	})

	t.Run("Checkpoint", func(t *testing.T) {
		t.Parallel()

		t.Run("WriteReplaceListAndAdvance", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job, lease := submitAndClaim(t, b, newSubmitParams(t), "w")
			write := func(stage store.JobStage, chunk int32, output string, advance bool) {
				t.Helper()
				err := CheckpointWrite(b.ctx, b.engine, &CheckpointWriteParams{
					Lease: lease, Stage: stage, Chunk: chunk,
					StageKey:    fmt.Sprintf("stage:v1:%s:%s:%d", job.ID, stage, chunk),
					CodeVersion: "v1", Output: []byte(output),
					AdvanceStage: advance, Message: string(stage) + " done",
				})
				require.NoError(t, err)
			}
			write(store.JobStageTextExtracted, -1, "text", true)
			write(store.JobStageChunksReady, -1, "chunks", true)
			write(store.JobStageLLMDone, 1, "second chunk", false)
			write(store.JobStageLLMDone, 0, "first chunk", false)
			write(store.JobStageLLMDone, 0, "first chunk, again", false) // replaces
			write(store.JobStageLLMDone, -1, "merged", true)

			checkpoints, err := b.engine.CheckpointList(b.ctx, &store.CheckpointListParams{JobID: job.ID})
			require.NoError(t, err)
			type summary struct {
				Stage  store.JobStage
				Chunk  int32
				Output string
			}
			var got []summary
			for _, c := range checkpoints {
				require.Equal(t, job.ID, c.JobID)
				require.Equal(t, job.Tenant, c.Tenant)
				require.Equal(t, fmt.Sprintf("stage:v1:%s:%s:%d", job.ID, c.Stage, c.Chunk), c.StageKey)
				require.Equal(t, "v1", c.CodeVersion)
				require.Equal(t, int32(1), c.Attempt)
				require.WithinDuration(t, time.Now(), c.CreatedAt, time.Minute)
				got = append(got, summary{c.Stage, c.Chunk, string(c.Output)})
			}
			require.Equal(t, []summary{
				{store.JobStageTextExtracted, -1, "text"},
				{store.JobStageChunksReady, -1, "chunks"},
				{store.JobStageLLMDone, -1, "merged"},
				{store.JobStageLLMDone, 0, "first chunk, again"},
				{store.JobStageLLMDone, 1, "second chunk"},
			}, got)

			current, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			require.Equal(t, store.JobStageLLMDone, current.Stage)
			require.Equal(t, store.JobStatusRunning, current.Status)

			events := requireConsecutiveEvents(t, b.store, job)
			require.Len(t, events, 5) // queued, claimed, and one per advance
			for i, stage := range []store.JobStage{store.JobStageTextExtracted, store.JobStageChunksReady, store.JobStageLLMDone} {
				e := events[2+i]
				require.Equal(t, store.JobStatusRunning, e.Status)
				require.Equal(t, stage, e.Stage)
				require.Equal(t, int32(1), e.Attempt)
				require.Equal(t, string(stage)+" done", e.Message)
			}
		})

		t.Run("DecisionCacheIsScopedByTenant", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			const stageKey = "stage:v1:llm_done:shared"
			write := func(lease store.Lease, output string) {
				t.Helper()
				require.NoError(t, CheckpointWrite(b.ctx, b.engine, &CheckpointWriteParams{
					Lease: lease, Stage: store.JobStageLLMDone, Chunk: -1, StageKey: stageKey,
					CodeVersion: "v1", Output: []byte(output),
				}))
			}
			lookup := func(tenant string) (*store.Checkpoint, error) {
				return b.engine.CheckpointGetByStageKey(b.ctx, &store.CheckpointGetByStageKeyParams{Tenant: tenant, StageKey: stageKey})
			}

			jobA, leaseA := submitAndClaim(t, b, newSubmitParams(t), "w")
			_, err := lookup(jobA.Tenant)
			require.ErrorIs(t, err, store.ErrNotFound)
			write(leaseA, "answer of tenant a")

			// Another job of the tenant finds it.
			otherA, otherLease := submitAndClaim(t, b, newSubmitParams(t), "w")
			require.Equal(t, jobA.Tenant, otherA.Tenant)
			hit, err := lookup(otherA.Tenant)
			require.NoError(t, err)
			require.Equal(t, jobA.ID, hit.JobID)
			require.Equal(t, jobA.Tenant, hit.Tenant)
			require.Equal(t, stageKey, hit.StageKey)
			require.Equal(t, store.JobStageLLMDone, hit.Stage)
			require.Equal(t, "answer of tenant a", string(hit.Output))
			require.Empty(t, hit.ReusedFrom, "computed by the job itself")

			// The job served from the cache records where its result came from.
			require.NoError(t, CheckpointWrite(b.ctx, b.engine, &CheckpointWriteParams{
				Lease: otherLease, Stage: store.JobStageLLMDone, Chunk: -1, StageKey: stageKey,
				CodeVersion: "v1", Output: hit.Output, ReusedFrom: hit.JobID,
			}))
			cps, err := b.engine.CheckpointList(b.ctx, &store.CheckpointListParams{JobID: otherA.ID})
			require.NoError(t, err)
			require.Len(t, cps, 1)
			require.Equal(t, jobA.ID, cps[0].ReusedFrom)

			// Another tenant does not, until it computes its own.
			paramsB := newSubmitParams(t)
			paramsB.Tenant = "tenant-b"
			_, err = lookup(paramsB.Tenant)
			require.ErrorIs(t, err, store.ErrNotFound)
			jobB, leaseB := submitAndClaim(t, b, paramsB, "w")
			write(leaseB, "answer of tenant b")
			hit, err = lookup(paramsB.Tenant)
			require.NoError(t, err)
			require.Equal(t, jobB.ID, hit.JobID)
			require.Equal(t, "answer of tenant b", string(hit.Output))
			hit, err = lookup(jobA.Tenant)
			require.NoError(t, err)
			require.Equal(t, otherA.ID, hit.JobID, "the newest of the tenant's checkpoints of the key")
			require.Equal(t, "answer of tenant a", string(hit.Output))
		})
	})

	t.Run("LLMAttempt", func(t *testing.T) {
		t.Parallel()

		t.Run("RecordAddsBilledUsageAndListsInOrder", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job, lease := submitAndClaim(t, b, newSubmitParams(t), "w")
			attempt := func(outcome store.LLMOutcome, billed bool, chunk int32, prompt, completion, cost int64) store.LLMAttempt {
				return store.LLMAttempt{
					JobID: job.ID, JobAttempt: job.Attempt, Stage: store.JobStageLLMDone, Chunk: chunk,
					ProviderKey: fmt.Sprintf("pk:%s:%d", job.ID, chunk), Model: "model-x", Outcome: outcome, Billed: billed,
					PromptTokens: prompt, CompletionTokens: completion, CostMicros: cost,
					LatencyMillis: 800, ProviderRequestID: fmt.Sprintf("req-%s-%d", outcome, chunk), Error: "",
				}
			}
			recorded := []store.LLMAttempt{
				attempt(store.LLMOutcomeRateLimited, false, 0, 0, 0, 0),
				attempt(store.LLMOutcomeOutcomeUnknown, false, 0, 100, 0, 0),
				attempt(store.LLMOutcomeSucceeded, true, 0, 120, 30, 450),
				attempt(store.LLMOutcomeSucceeded, true, 1, 10, 5, 20),
			}
			recorded[0].Error = "429 too many requests"
			recorded[3].PriceClass = store.PriceClassBatch
			for _, a := range recorded {
				require.NoError(t, b.engine.LLMAttemptRecord(b.ctx, &store.LLMAttemptRecordParams{Attempt: a}))
			}

			got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			require.Equal(t, store.JobUsage{PromptTokens: 130, CompletionTokens: 35, CostMicros: 470, LLMCalls: 2}, got.Usage)
			require.Equal(t, int64(165), got.BudgetTokens)

			list, err := b.engine.LLMAttemptList(b.ctx, &store.LLMAttemptListParams{JobID: job.ID})
			require.NoError(t, err)
			require.Len(t, list, len(recorded))
			for i, a := range list {
				if i > 0 {
					require.Greater(t, a.ID, list[i-1].ID)
				}
				require.WithinDuration(t, time.Now(), a.CreatedAt, time.Minute)
				want := recorded[i]
				want.ID, want.Tenant, want.CreatedAt = a.ID, job.Tenant, a.CreatedAt
				want.PriceClass = want.PriceClass.Or() // none given is online
				require.Equal(t, want, *a)
			}

			// Not fenced: an attempt journaled after the lease is gone still
			// counts.
			_, err = b.engine.JobTransition(b.ctx, &store.JobTransitionParams{Lease: lease, To: store.JobStatusFailed})
			require.NoError(t, err)
			require.NoError(t, b.engine.LLMAttemptRecord(b.ctx, &store.LLMAttemptRecordParams{
				Attempt: attempt(store.LLMOutcomeSucceeded, true, 2, 1, 1, 1),
			}))
			got, err = b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			require.Equal(t, int32(3), got.Usage.LLMCalls)

			err = b.engine.LLMAttemptRecord(b.ctx, &store.LLMAttemptRecordParams{
				Attempt: store.LLMAttempt{JobID: newUUID(t), Outcome: store.LLMOutcomeSucceeded, Stage: store.JobStageLLMDone},
			})
			require.ErrorIs(t, err, store.ErrNotFound)
		})

		t.Run("AFencedRecordIsWrittenOnlyUnderItsLease", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			job, lease := submitAndClaim(t, b, newSubmitParams(t), "w1")
			intent := func(attempt int32, tag string) store.LLMAttempt {
				return store.LLMAttempt{
					JobID: job.ID, JobAttempt: attempt, Stage: store.JobStageLLMDone, ProviderKey: "pk-fenced",
					Outcome: store.LLMOutcomeOutcomeUnknown, Error: "provider batch " + tag,
				}
			}
			require.NoError(t, b.engine.LLMAttemptRecord(b.ctx, &store.LLMAttemptRecordParams{Attempt: intent(lease.Attempt, "t1"), Fence: &lease}))
			other := lease
			other.Owner = "w2"
			require.ErrorIs(t, b.engine.LLMAttemptRecord(b.ctx, &store.LLMAttemptRecordParams{Attempt: intent(lease.Attempt, "t-other"), Fence: &other}), store.ErrLeaseLost)
			stale := lease
			stale.Attempt--
			require.ErrorIs(t, b.engine.LLMAttemptRecord(b.ctx, &store.LLMAttemptRecordParams{Attempt: intent(lease.Attempt, "t-stale"), Fence: &stale}), store.ErrLeaseLost)
			elsewhere := lease
			elsewhere.JobID = newUUID(t)
			require.ErrorIs(t, b.engine.LLMAttemptRecord(b.ctx, &store.LLMAttemptRecordParams{Attempt: intent(lease.Attempt, "t-elsewhere"), Fence: &elsewhere}), store.ErrLeaseLost)

			// Taken over: the first attempt writes nothing more, the taker does.
			past := time.Now().Add(-time.Second)
			_, err := b.engine.JobTransition(b.ctx, &store.JobTransitionParams{Lease: lease, To: store.JobStatusRetryWait, RunAfter: &past})
			require.NoError(t, err)
			taker := leaseOf(claimOne(t, b.engine, "w2", engineLease))
			require.Equal(t, job.ID, taker.JobID)
			require.NoError(t, b.engine.LLMAttemptRecord(b.ctx, &store.LLMAttemptRecordParams{Attempt: intent(taker.Attempt, "t2"), Fence: &taker}))
			require.ErrorIs(t, b.engine.LLMAttemptRecord(b.ctx, &store.LLMAttemptRecordParams{Attempt: intent(lease.Attempt, "t1-late"), Fence: &lease}), store.ErrLeaseLost)

			list, err := b.engine.LLMAttemptList(b.ctx, &store.LLMAttemptListParams{JobID: job.ID})
			require.NoError(t, err)
			var tags []string
			for _, a := range list {
				tags = append(tags, a.Error)
			}
			require.Equal(t, []string{"provider batch t1", "provider batch t2"}, tags, "only the rows written under their lease")
		})

		t.Run("PriceClassIsJournaledWithTheCheckpoint", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			job, lease := submitAndClaim(t, b, newSubmitParams(t), "w")
			for i, class := range []store.PriceClass{store.PriceClassBatch, "", store.PriceClassOnline} {
				require.NoError(t, b.engine.CheckpointWriteMany(b.ctx, &store.CheckpointWriteManyParams{
					Lease: lease,
					Attempt: &store.LLMAttempt{
						JobID: job.ID, JobAttempt: job.Attempt, Stage: store.JobStageLLMDone, Chunk: int32(i),
						ProviderKey: fmt.Sprintf("pk-class-%d", i), Outcome: store.LLMOutcomeSucceeded, Billed: true,
						PromptTokens: 10, CompletionTokens: 5, CostMicros: 7, PriceClass: class,
					},
				}))
			}
			list, err := b.engine.LLMAttemptList(b.ctx, &store.LLMAttemptListParams{JobID: job.ID})
			require.NoError(t, err)
			require.Len(t, list, 3)
			require.Equal(t, []store.PriceClass{store.PriceClassBatch, store.PriceClassOnline, store.PriceClassOnline},
				[]store.PriceClass{list[0].PriceClass, list[1].PriceClass, list[2].PriceClass})
		})

		t.Run("ABillIsIdentifiedByTheProvidersRequestID", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			job, _ := submitAndClaim(t, b, newSubmitParams(t), "w")
			record := func(requestID string) {
				require.NoError(t, b.engine.LLMAttemptRecord(b.ctx, &store.LLMAttemptRecordParams{Attempt: store.LLMAttempt{
					JobID: job.ID, JobAttempt: job.Attempt, Stage: store.JobStageLLMDone, ProviderKey: "pk-retried",
					Outcome: store.LLMOutcomeSucceeded, Billed: true, PromptTokens: 10, CompletionTokens: 5, CostMicros: 7,
					ProviderRequestID: requestID,
				}}))
			}
			record("req-1")
			record("req-1") // the provider's idempotency store answered: one bill
			record("req-2") // a provider without one billed the retry again
			got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			require.Equal(t, store.JobUsage{PromptTokens: 20, CompletionTokens: 10, CostMicros: 14, LLMCalls: 2}, got.Usage)
		})

		t.Run("AProviderKeysBillCountsOnce", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			job, _ := submitAndClaim(t, b, newSubmitParams(t), "w")
			billed := store.LLMAttempt{
				JobID: job.ID, JobAttempt: job.Attempt, Stage: store.JobStageLLMDone, Chunk: 0,
				ProviderKey: "pk-once", Outcome: store.LLMOutcomeSucceeded, Billed: true,
				PromptTokens: 10, CompletionTokens: 5, CostMicros: 7,
			}
			// A worker that lost its lease and its successor journal the same
			// answer, some of them at once.
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					assert.NoError(t, b.engine.LLMAttemptRecord(b.ctx, &store.LLMAttemptRecordParams{Attempt: billed}))
				}()
			}
			wg.Wait()
			got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			require.Equal(t, store.JobUsage{PromptTokens: 10, CompletionTokens: 5, CostMicros: 7, LLMCalls: 1}, got.Usage)
			list, err := b.engine.LLMAttemptList(b.ctx, &store.LLMAttemptListParams{JobID: job.ID})
			require.NoError(t, err)
			require.Len(t, list, 8, "every attempt is journaled")
			var counted int
			for _, a := range list {
				if a.Billed {
					counted++
				}
			}
			require.Equal(t, 1, counted)
		})
	})

	t.Run("JobPublish", func(t *testing.T) {
		t.Parallel()

		publish := func(b *testBundle, lease store.Lease, output string) (*store.Job, error) {
			return Publish(b.ctx, b.engine, &store.JobPublishParams{
				Lease: lease, Output: []byte(output), Message: "published",
			})
		}

		t.Run("WritesOutputEventAndOutboxOnce", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job, lease := submitAndClaim(t, b, newSubmitParams(t), "w")
			output := `{"total": 42}`
			done, err := publish(b, lease, output)
			require.NoError(t, err)
			require.Equal(t, store.JobStatusSucceeded, done.Status)
			require.Equal(t, store.JobStagePublished, done.Stage)
			require.JSONEq(t, output, string(done.Output))
			require.Empty(t, done.DeduplicatedFrom)
			require.NotNil(t, done.FinishedAt)
			require.Empty(t, done.LeaseOwner)
			require.Nil(t, done.LeaseUntil)

			got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			require.Equal(t, done, got)

			events := requireConsecutiveEvents(t, b.store, job)
			require.Len(t, events, 3)
			last := events[2]
			require.Equal(t, store.JobStatusSucceeded, last.Status)
			require.Equal(t, store.JobStagePublished, last.Stage)
			require.Equal(t, int32(1), last.Attempt)
			require.Equal(t, "published", last.Message)

			outbox, err := b.engine.OutboxList(b.ctx, &store.OutboxListParams{JobID: job.ID})
			require.NoError(t, err)
			require.Len(t, outbox, 1)
			require.Equal(t, "job:"+job.ID+":job.succeeded:0", outbox[0].EventID)
			require.Equal(t, job.Tenant, outbox[0].Tenant)
			require.Equal(t, job.ID, outbox[0].JobID)
			require.Equal(t, "job.succeeded", outbox[0].EventType)
			require.Nil(t, outbox[0].RoutedAt)

			computed, err := b.engine.JobComputedSuccessGet(b.ctx, &store.JobComputedSuccessGetParams{Tenant: job.Tenant, DedupKey: job.DedupKey})
			require.NoError(t, err)
			require.Equal(t, done, computed)
			_, err = b.engine.JobComputedSuccessGet(b.ctx, &store.JobComputedSuccessGetParams{Tenant: "tenant-b", DedupKey: job.DedupKey})
			require.ErrorIs(t, err, store.ErrNotFound)

			_, err = publish(b, lease, `{"total": 43}`)
			require.ErrorIs(t, err, store.ErrLeaseLost)
			require.Equal(t, events, requireConsecutiveEvents(t, b.store, job))
			again, err := b.engine.OutboxList(b.ctx, &store.OutboxListParams{JobID: job.ID})
			require.NoError(t, err)
			require.Equal(t, outbox, again)
		})

		t.Run("PublishesAnEarlierComputedSuccessAsDeduplicated", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			first, firstLease := submitAndClaim(t, b, newSubmitParams(t), "w")
			params := newSubmitParams(t)
			params.DedupKey = first.DedupKey
			second, secondLease := submitAndClaim(t, b, params, "w")

			_, err := publish(b, firstLease, `{"answer": 1}`)
			require.NoError(t, err)
			done, err := publish(b, secondLease, `{"answer": 2}`)
			require.NoError(t, err)
			require.Equal(t, store.JobStatusSucceeded, done.Status)
			require.Equal(t, first.ID, done.DeduplicatedFrom)
			require.JSONEq(t, `{"answer": 1}`, string(done.Output))

			events := requireConsecutiveEvents(t, b.store, second)
			require.Contains(t, events[len(events)-1].Message, first.ID)

			computed, err := b.engine.JobComputedSuccessGet(b.ctx, &store.JobComputedSuccessGetParams{Tenant: first.Tenant, DedupKey: first.DedupKey})
			require.NoError(t, err)
			require.Equal(t, first.ID, computed.ID)
		})

		t.Run("ConcurrentPublishersOfOneDedupKeyComputeOnce", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			for round := range 5 {
				first, firstLease := submitAndClaim(t, b, newSubmitParams(t), "w")
				params := newSubmitParams(t)
				params.DedupKey = first.DedupKey
				_, secondLease := submitAndClaim(t, b, params, "w")

				leases := []store.Lease{firstLease, secondLease}
				outputs := []string{`{"by": 0}`, `{"by": 1}`}
				done := make([]*store.Job, 2)
				errs := make([]error, 2)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range leases {
					wg.Go(func() {
						<-start
						done[i], errs[i] = publish(b, leases[i], outputs[i])
					})
				}
				close(start)
				wg.Wait()
				require.NoError(t, errs[0], "round %d", round)
				require.NoError(t, errs[1], "round %d", round)

				winner, loser := 0, 1
				if done[0].DeduplicatedFrom != "" {
					winner, loser = 1, 0
				}
				require.Empty(t, done[winner].DeduplicatedFrom, "round %d: both deduplicated", round)
				require.Equal(t, done[winner].ID, done[loser].DeduplicatedFrom, "round %d", round)
				require.Equal(t, store.JobStatusSucceeded, done[winner].Status)
				require.Equal(t, store.JobStatusSucceeded, done[loser].Status)
				require.JSONEq(t, outputs[winner], string(done[winner].Output))
				require.JSONEq(t, outputs[winner], string(done[loser].Output))
				requireConsecutiveEvents(t, b.store, done[winner])
				requireConsecutiveEvents(t, b.store, done[loser])

				computed, err := b.engine.JobComputedSuccessGet(b.ctx, &store.JobComputedSuccessGetParams{Tenant: first.Tenant, DedupKey: first.DedupKey})
				require.NoError(t, err)
				require.Equal(t, done[winner].ID, computed.ID)
			}
		})
	})

	t.Run("JobTransition", func(t *testing.T) {
		t.Parallel()

		t.Run("OnlyARunningJobMoves", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			// The lease names the job's owner and attempt; only the status
			// keeps it from moving: the fence holds in every other status.
			for _, from := range allStatuses {
				if from == store.JobStatusRunning {
					continue
				}
				job := jobIn(t, b.store, from)
				events := requireConsecutiveEvents(t, b.store, job)
				lease := store.Lease{JobID: job.ID, Owner: factoryLeaseOwner, Attempt: job.Attempt}
				_, err := b.engine.JobTransition(b.ctx, &store.JobTransitionParams{Lease: lease, To: store.JobStatusFailed})
				require.ErrorIs(t, err, store.ErrLeaseLost, "from %s", from)
				_, err = heartbeat(b.ctx, b.engine, &heartbeatParams{Lease: lease, LeaseDuration: engineLease})
				require.ErrorIs(t, err, store.ErrLeaseLost, "from %s", from)
				require.Equal(t, events, requireConsecutiveEvents(t, b.store, job), "from %s", from)
			}
		})

		t.Run("RefundAttemptGivesTheAttemptBackToTheBudget", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			job, lease := submitAndClaim(t, b, newSubmitParams(t), "w")
			require.EqualValues(t, 1, job.BudgetAttempts)
			now := time.Now()
			got, err := b.engine.JobTransition(b.ctx, &store.JobTransitionParams{
				Lease: lease, To: store.JobStatusRetryWait, RunAfter: &now, RefundAttempt: true, Message: "shutting down",
			})
			require.NoError(t, err)
			require.Zero(t, got.BudgetAttempts)
			require.Equal(t, job.Attempt, got.Attempt, "the fencing token is not refunded")
			again := claimOne(t, b.engine, "w2", time.Minute)
			require.EqualValues(t, 1, again.BudgetAttempts)
			require.Equal(t, job.Attempt+1, again.Attempt)
		})

		for _, to := range []store.JobStatus{
			store.JobStatusRetryWait,
			store.JobStatusFailed,
			store.JobStatusDeadLettered,
			store.JobStatusOutcomeUnknown,
			store.JobStatusAwaitingApproval,
			store.JobStatusCancelled,
		} {
			t.Run("To_"+string(to), func(t *testing.T) {
				t.Parallel()
				b := setup(t)

				job, lease := submitAndClaim(t, b, newSubmitParams(t), "w")
				jobErr := &store.JobError{Code: "unavailable", Message: "503 from provider", Retryable: true}
				params := &store.JobTransitionParams{Lease: lease, To: to, Error: jobErr, Message: "moving on"}
				if to == store.JobStatusRetryWait {
					runAfter := time.Now().Add(time.Hour)
					params.RunAfter = &runAfter
				}
				moved, err := b.engine.JobTransition(b.ctx, params)
				require.NoError(t, err)
				require.Equal(t, to, moved.Status)
				require.Equal(t, jobErr, moved.Error)
				require.Empty(t, moved.LeaseOwner)
				require.Nil(t, moved.LeaseUntil)
				require.Equal(t, job.Attempt, moved.Attempt)
				if to == store.JobStatusRetryWait {
					require.NotNil(t, moved.RunAfter)
					require.WithinDuration(t, *params.RunAfter, *moved.RunAfter, time.Millisecond)
				} else {
					require.Nil(t, moved.RunAfter)
				}
				switch to {
				case store.JobStatusFailed, store.JobStatusDeadLettered, store.JobStatusCancelled:
					require.NotNil(t, moved.FinishedAt)
				default:
					require.Nil(t, moved.FinishedAt)
				}

				got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
				require.NoError(t, err)
				require.Equal(t, moved, got)

				events := requireConsecutiveEvents(t, b.store, job)
				require.Len(t, events, 3)
				last := events[2]
				require.Equal(t, to, last.Status)
				require.Equal(t, job.Stage, last.Stage)
				require.Equal(t, job.Attempt, last.Attempt)
				require.Contains(t, last.Message, "moving on")
				require.Contains(t, last.Message, "unavailable: 503 from provider")

				// The lease is gone with the transition.
				_, err = heartbeat(b.ctx, b.engine, &heartbeatParams{Lease: lease, LeaseDuration: engineLease})
				require.ErrorIs(t, err, store.ErrLeaseLost)
				_, err = b.engine.JobTransition(b.ctx, params)
				require.ErrorIs(t, err, store.ErrLeaseLost)
				require.Len(t, requireConsecutiveEvents(t, b.store, job), 3)
			})
		}

		t.Run("AwaitingApprovalStoresThePlannedOutput", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job, lease := submitAndClaim(t, b, newSubmitParams(t), "w")
			plan := `{"pay": {"amount": 42, "to": "ACME"}}`
			moved, err := b.engine.JobTransition(b.ctx, &store.JobTransitionParams{
				Lease: lease, To: store.JobStatusAwaitingApproval, Output: []byte(plan), Message: "review the payment",
			})
			require.NoError(t, err)
			require.Equal(t, store.JobStatusAwaitingApproval, moved.Status)
			require.JSONEq(t, plan, string(moved.Output))
			require.False(t, moved.Approved)
			got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			require.Equal(t, moved, got)
		})

		t.Run("NilErrorKeepsTheLastOne", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job, lease := submitAndClaim(t, b, newSubmitParams(t), "w")
			jobErr := &store.JobError{Code: "rate_limited", Message: "429", Retryable: true}
			runAfter := time.Now().Add(-time.Hour)
			_, err := b.engine.JobTransition(b.ctx, &store.JobTransitionParams{
				Lease: lease, To: store.JobStatusRetryWait, Error: jobErr, RunAfter: &runAfter,
			})
			require.NoError(t, err)
			again := claimOne(t, b.engine, "w", engineLease)
			require.Equal(t, job.ID, again.ID)
			require.Equal(t, jobErr, again.Error)
			moved, err := b.engine.JobTransition(b.ctx, &store.JobTransitionParams{
				Lease: leaseOf(again), To: store.JobStatusDeadLettered, Message: "budget spent",
			})
			require.NoError(t, err)
			require.Equal(t, jobErr, moved.Error)
			events := requireConsecutiveEvents(t, b.store, job)
			require.Equal(t, "budget spent", events[len(events)-1].Message)
		})

		t.Run("RefusedTargetWritesNothing", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job, lease := submitAndClaim(t, b, newSubmitParams(t), "w")
			refused := 0
			for _, to := range append(slices.Clone(allStatuses), "", "bogus") {
				if allowed, _ := store.WorkerTransition(to); allowed {
					continue
				}
				refused++
				_, err := b.engine.JobTransition(b.ctx, &store.JobTransitionParams{Lease: lease, To: to, Message: "no"})
				require.ErrorIs(t, err, store.ErrTransitionRefused, "to %q", to)
			}
			require.Equal(t, 5, refused) // queued, running, succeeded, "", bogus
			got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			got.ClaimedFrom = job.ClaimedFrom // the claim's, not the job's
			require.Equal(t, job, got)
			require.Len(t, requireConsecutiveEvents(t, b.store, job), 2)
		})
	})
}

// claimOne claims with a limit above one and expects exactly one job.
func claimOne(t *testing.T, engine store.EngineStore, owner string, lease time.Duration) *store.Job {
	t.Helper()
	jobs, err := engine.JobClaim(t.Context(), &store.JobClaimParams{Owner: owner, Limit: 10, LeaseDuration: lease})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, owner, jobs[0].LeaseOwner)
	return jobs[0]
}

// claimAt claims for owner at the injected time at (JobClaimParams.Now).
func claimAt(t *testing.T, engine store.EngineStore, owner string, at time.Time) []*store.Job {
	t.Helper()
	jobs, err := engine.JobClaim(t.Context(), &store.JobClaimParams{Owner: owner, Limit: 10, LeaseDuration: engineLease, Now: &at})
	require.NoError(t, err)
	return jobs
}

func leaseOf(job *store.Job) store.Lease {
	return store.Lease{JobID: job.ID, Owner: job.LeaseOwner, Attempt: job.Attempt}
}

// requireConsecutiveEvents returns the job's events and asserts their seqs
// run 1, 2, 3, ... without a gap.
func requireConsecutiveEvents(t *testing.T, s store.Store, job *store.Job) []*store.JobEvent {
	t.Helper()
	events, err := s.JobEventList(t.Context(), &store.JobEventListParams{Tenant: job.Tenant, JobID: job.ID})
	require.NoError(t, err)
	require.NotEmpty(t, events)
	for i, e := range events {
		require.Equal(t, job.ID, e.JobID)
		require.Equal(t, int32(i+1), e.Seq, "events of job %s", job.ID)
	}
	return events
}
