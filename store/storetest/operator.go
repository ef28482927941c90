package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// exerciseOperator is the conformance suite of store.OperatorStore. Jobs
// start in the status a test needs from the state factory (jobIn).
func exerciseOperator(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()

	type testBundle struct {
		store    store.Store
		engine   store.EngineStore
		operator store.OperatorStore
		factory  Store
		ctx      context.Context
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		s := newStore(t)
		return &testBundle{store: s, engine: s, operator: s, factory: s, ctx: t.Context()}
	}

	get := func(t *testing.T, b *testBundle, job *store.Job) *store.Job {
		t.Helper()
		got, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
		require.NoError(t, err)
		return got
	}

	// requireUnchanged asserts the job and its events are as they were.
	requireUnchanged := func(t *testing.T, b *testBundle, job *store.Job, events []*store.JobEvent) {
		t.Helper()
		require.Equal(t, job, get(t, b, job))
		require.Equal(t, events, requireConsecutiveEvents(t, b.store, job))
	}

	// lastEvent asserts the events are consecutive and returns the newest.
	lastEvent := func(t *testing.T, b *testBundle, job *store.Job) *store.JobEvent {
		t.Helper()
		events := requireConsecutiveEvents(t, b.store, job)
		return events[len(events)-1]
	}

	cancel := func(b *testBundle, job *store.Job, idem *store.IdempotencyParams) (*store.OperatorResult, error) {
		return b.operator.JobCancel(b.ctx, &store.JobCancelParams{Tenant: job.Tenant, ID: job.ID, Message: "not needed", Idempotency: idem})
	}
	replay := func(b *testBundle, job *store.Job, idem *store.IdempotencyParams) (*store.OperatorResult, error) {
		return b.operator.JobReplay(b.ctx, &store.JobReplayParams{Tenant: job.Tenant, ID: job.ID, Message: "provider is back", Idempotency: idem})
	}
	approve := func(b *testBundle, job *store.Job, idem *store.IdempotencyParams) (*store.OperatorResult, error) {
		return b.operator.JobApprove(b.ctx, &store.JobApproveParams{Tenant: job.Tenant, ID: job.ID, Approve: true, Message: "looks right", Idempotency: idem})
	}
	resolve := func(b *testBundle, job *store.Job, idem *store.IdempotencyParams) (*store.OperatorResult, error) {
		return b.operator.JobResolve(b.ctx, &store.JobResolveParams{Tenant: job.Tenant, ID: job.ID, To: store.JobStatusQueued, Message: "not billed", Idempotency: idem})
	}

	t.Run("JobCancel", func(t *testing.T) {
		t.Parallel()

		for _, from := range []store.JobStatus{
			store.JobStatusQueued,
			store.JobStatusRetryWait,
			store.JobStatusAwaitingApproval,
			store.JobStatusOutcomeUnknown,
		} {
			t.Run("CancelsAtOnce_"+string(from), func(t *testing.T) {
				t.Parallel()
				b := setup(t)

				job := jobIn(t, b.factory, from)
				res, err := cancel(b, job, nil)
				require.NoError(t, err)
				require.False(t, res.Replayed)
				got := res.Job
				require.Equal(t, store.JobStatusCancelled, got.Status)
				require.NotNil(t, got.FinishedAt)
				require.Empty(t, got.LeaseOwner)
				require.Nil(t, got.LeaseUntil)
				require.Nil(t, got.RunAfter)
				require.False(t, got.CancelRequested)
				require.Equal(t, got, get(t, b, job))

				last := lastEvent(t, b, job)
				require.Equal(t, store.JobStatusCancelled, last.Status)
				require.Equal(t, "cancelled: not needed", last.Message)
			})
		}

		t.Run("RunningJobGetsCancelRequestedAndNoEvent", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job := jobIn(t, b.factory, store.JobStatusRunning)
			events := requireConsecutiveEvents(t, b.store, job)
			res, err := cancel(b, job, nil)
			require.NoError(t, err)
			require.False(t, res.Replayed)
			require.Equal(t, store.JobStatusRunning, res.Job.Status)
			require.True(t, res.Job.CancelRequested)
			require.Equal(t, job.LeaseOwner, res.Job.LeaseOwner)
			require.Nil(t, res.Job.FinishedAt)
			require.Equal(t, res.Job, get(t, b, job))
			require.Equal(t, events, requireConsecutiveEvents(t, b.store, job)) // a request, not a transition

			beat, err := heartbeat(b.ctx, b.engine, &heartbeatParams{Lease: leaseOf(job), LeaseDuration: engineLease})
			require.NoError(t, err)
			require.True(t, beat.CancelRequested)

			// The worker settles it.
			settled, err := b.engine.JobTransition(b.ctx, &store.JobTransitionParams{
				Lease: leaseOf(job), To: store.JobStatusCancelled, Message: "cancel requested",
			})
			require.NoError(t, err)
			require.Equal(t, store.JobStatusCancelled, settled.Status)
			require.Equal(t, store.JobStatusCancelled, lastEvent(t, b, job).Status)
		})

		t.Run("ARequestedCancelWinsOverParkingTheJob", func(t *testing.T) {
			t.Parallel()
			// The worker settles before its next heartbeat could tell it: a
			// target that would park the job cancels it instead.
			for _, to := range []store.JobStatus{store.JobStatusRetryWait, store.JobStatusOutcomeUnknown, store.JobStatusAwaitingApproval} {
				b := setup(t)
				job := jobIn(t, b.factory, store.JobStatusRunning)
				_, err := cancel(b, job, nil)
				require.NoError(t, err)
				runAfter := time.Now().Add(time.Minute)
				settled, err := b.engine.JobTransition(b.ctx, &store.JobTransitionParams{
					Lease: leaseOf(job), To: to, RunAfter: &runAfter, Message: "parking",
				})
				require.NoError(t, err)
				require.Equal(t, store.JobStatusCancelled, settled.Status, to)
				require.NotNil(t, settled.FinishedAt)
				require.Nil(t, settled.RunAfter)
				last := lastEvent(t, b, job)
				require.Equal(t, store.JobStatusCancelled, last.Status)
				require.Contains(t, last.Message, "cancelled: requested while running")
			}
			// A target that ends the job anyway keeps its own status.
			b := setup(t)
			job := jobIn(t, b.factory, store.JobStatusRunning)
			_, err := cancel(b, job, nil)
			require.NoError(t, err)
			failed, err := b.engine.JobTransition(b.ctx, &store.JobTransitionParams{Lease: leaseOf(job), To: store.JobStatusFailed})
			require.NoError(t, err)
			require.Equal(t, store.JobStatusFailed, failed.Status)
		})

		t.Run("CancelledJobIsReturnedAsItIs", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job := jobIn(t, b.factory, store.JobStatusCancelled)
			events := requireConsecutiveEvents(t, b.store, job)
			res, err := cancel(b, job, nil)
			require.NoError(t, err)
			require.False(t, res.Replayed)
			require.Equal(t, job, res.Job)
			requireUnchanged(t, b, job, events)
		})

	})

	t.Run("JobReplay", func(t *testing.T) {
		t.Parallel()

		for _, from := range []store.JobStatus{store.JobStatusFailed, store.JobStatusDeadLettered} {
			t.Run("QueuesWithAFreshBudget_"+string(from), func(t *testing.T) {
				t.Parallel()
				b := setup(t)

				submitted := submit(t, b.store, newSubmitParams(t))
				running := claimOne(t, b.engine, "w", engineLease)
				require.NoError(t, b.engine.LLMAttemptRecord(b.ctx, &store.LLMAttemptRecordParams{Attempt: store.LLMAttempt{
					JobID: running.ID, JobAttempt: running.Attempt, Stage: store.JobStageLLMDone, Chunk: -1,
					ProviderKey: "pk:" + running.ID, Outcome: store.LLMOutcomeSucceeded, Billed: true,
					PromptTokens: 100, CompletionTokens: 20, CostMicros: 300,
				}}))
				require.NoError(t, CheckpointWrite(b.ctx, b.engine, &CheckpointWriteParams{
					Lease: leaseOf(running), Stage: store.JobStageTextExtracted, Chunk: -1, StageKey: "stage:v1:" + running.ID,
					CodeVersion: "v1", Output: []byte("text"), AdvanceStage: true, Message: "text extracted",
				}))
				dead, err := b.engine.JobTransition(b.ctx, &store.JobTransitionParams{
					Lease: leaseOf(running), To: from, Error: &store.JobError{Code: "budget", Message: "spent"},
				})
				require.NoError(t, err)
				require.Equal(t, int64(120), dead.BudgetTokens)

				res, err := replay(b, dead, nil)
				require.NoError(t, err)
				require.False(t, res.Replayed)
				got := res.Job
				require.Equal(t, store.JobStatusQueued, got.Status)
				require.Equal(t, store.JobStageTextExtracted, got.Stage) // checkpoints kept
				require.Nil(t, got.Error)
				require.Nil(t, got.FinishedAt)
				require.Nil(t, got.RunAfter)
				require.False(t, got.CancelRequested)
				require.Empty(t, got.LeaseOwner)
				require.Zero(t, got.BudgetAttempts)
				require.Zero(t, got.BudgetTokens)
				require.False(t, got.BudgetStartedAt.Before(submitted.BudgetStartedAt))
				require.WithinDuration(t, time.Now(), got.BudgetStartedAt, time.Minute)
				require.Equal(t, dead.Attempt, got.Attempt) // the fencing token only grows
				require.Equal(t, dead.Usage, got.Usage)     // what was spent stays spent
				require.Equal(t, got, get(t, b, dead))

				last := lastEvent(t, b, dead)
				require.Equal(t, store.JobStatusQueued, last.Status)
				require.Equal(t, "replayed: provider is back", last.Message)
				checkpoints, err := b.engine.CheckpointList(b.ctx, &store.CheckpointListParams{JobID: dead.ID})
				require.NoError(t, err)
				require.Len(t, checkpoints, 1)

				again := claimOne(t, b.engine, "w2", engineLease)
				require.Equal(t, dead.ID, again.ID)
				require.Equal(t, dead.Attempt+1, again.Attempt)
				require.Equal(t, int32(1), again.BudgetAttempts)
			})
		}

		t.Run("FromStageDeletesThatStageAndLater", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			// failedAt brings a fresh job through the stages given, writing a
			// checkpoint for each (two chunks for llm_done), and fails it.
			failedAt := func(stages ...store.JobStage) *store.Job {
				t.Helper()
				submit(t, b.store, newSubmitParams(t))
				running := claimOne(t, b.engine, "w", engineLease)
				for _, stage := range stages {
					chunks := []int32{-1}
					if stage == store.JobStageLLMDone {
						chunks = []int32{0, 1, -1}
					}
					for _, chunk := range chunks {
						require.NoError(t, CheckpointWrite(b.ctx, b.engine, &CheckpointWriteParams{
							Lease: leaseOf(running), Stage: stage, Chunk: chunk,
							StageKey:    fmt.Sprintf("stage:v1:%s:%s:%d", running.ID, stage, chunk),
							CodeVersion: "v1", Output: []byte(stage), AdvanceStage: chunk == -1, Message: string(stage),
						}))
					}
				}
				failed, err := b.engine.JobTransition(b.ctx, &store.JobTransitionParams{
					Lease: leaseOf(running), To: store.JobStatusFailed, Error: &store.JobError{Code: "invalid_output", Message: "schema"},
				})
				require.NoError(t, err)
				return failed
			}
			stagesOf := func(job *store.Job) []store.JobStage {
				t.Helper()
				checkpoints, err := b.engine.CheckpointList(b.ctx, &store.CheckpointListParams{JobID: job.ID})
				require.NoError(t, err)
				var stages []store.JobStage
				for _, c := range checkpoints {
					stages = append(stages, c.Stage)
				}
				return stages
			}
			replayFrom := func(job *store.Job, from store.JobStage) (*store.OperatorResult, error) {
				return b.operator.JobReplay(b.ctx, &store.JobReplayParams{Tenant: job.Tenant, ID: job.ID, FromStage: from, Message: "new validator"})
			}
			all := []store.JobStage{store.JobStageTextExtracted, store.JobStageChunksReady, store.JobStageLLMDone, store.JobStageValidated}

			job := failedAt(all...)
			require.Equal(t, store.JobStageValidated, job.Stage)
			res, err := replayFrom(job, store.JobStageLLMDone)
			require.NoError(t, err)
			require.Equal(t, store.JobStatusQueued, res.Job.Status)
			require.Equal(t, store.JobStageChunksReady, res.Job.Stage)
			require.Zero(t, res.Job.BudgetAttempts)
			require.Equal(t, []store.JobStage{store.JobStageTextExtracted, store.JobStageChunksReady}, stagesOf(job))
			last := lastEvent(t, b, job)
			require.Equal(t, store.JobStageChunksReady, last.Stage)
			require.Contains(t, last.Message, "llm_done")
			claimOne(t, b.engine, "w", engineLease) // out of jobIn's way

			// From text_extracted (or uploaded), the job starts over.
			job = failedAt(all...)
			res, err = replayFrom(job, store.JobStageTextExtracted)
			require.NoError(t, err)
			require.Equal(t, store.JobStageUploaded, res.Job.Stage)
			require.Empty(t, stagesOf(job))
			claimOne(t, b.engine, "w", engineLease)

			// A stage the job never reached leaves its stage as it is.
			job = failedAt(store.JobStageTextExtracted)
			res, err = replayFrom(job, store.JobStageValidated)
			require.NoError(t, err)
			require.Equal(t, store.JobStageTextExtracted, res.Job.Stage)
			require.Equal(t, []store.JobStage{store.JobStageTextExtracted}, stagesOf(job))
			claimOne(t, b.engine, "w", engineLease)

			// Published is no stage to replay from.
			job = failedAt(all...)
			events := requireConsecutiveEvents(t, b.store, job)
			_, err = replayFrom(job, store.JobStagePublished)
			require.Error(t, err)
			requireUnchanged(t, b, job, events)
			require.Len(t, stagesOf(job), 6)
		})

	})

	t.Run("JobResolve", func(t *testing.T) {
		t.Parallel()

		t.Run("RetryQueuesTheJob", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job := jobIn(t, b.factory, store.JobStatusOutcomeUnknown)
			res, err := resolve(b, job, nil)
			require.NoError(t, err)
			require.False(t, res.Replayed)
			require.Equal(t, store.JobStatusQueued, res.Job.Status)
			require.Nil(t, res.Job.FinishedAt)
			require.Equal(t, res.Job, get(t, b, job))
			last := lastEvent(t, b, job)
			require.Equal(t, store.JobStatusQueued, last.Status)
			require.Equal(t, "resolved: retry: not billed", last.Message)
			// A retry by hand starts the budget again: the time it waited
			// for an operator is not held against it.
			require.Zero(t, res.Job.BudgetAttempts)
			require.Zero(t, res.Job.BudgetTokens)
			require.WithinDuration(t, time.Now(), res.Job.BudgetStartedAt, time.Minute)

			again := claimOne(t, b.engine, "w2", engineLease)
			require.Equal(t, job.ID, again.ID)
			require.Equal(t, job.Attempt+1, again.Attempt)
			require.EqualValues(t, 1, again.BudgetAttempts)
		})

		t.Run("FailFailsTheJobWithItsError", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job := jobIn(t, b.factory, store.JobStatusOutcomeUnknown)
			jobErr := &store.JobError{Code: "provider_failed", Message: "the provider never ran it"}
			res, err := b.operator.JobResolve(b.ctx, &store.JobResolveParams{
				Tenant: job.Tenant, ID: job.ID, To: store.JobStatusFailed, Error: jobErr, Message: "checked the dashboard",
			})
			require.NoError(t, err)
			require.Equal(t, store.JobStatusFailed, res.Job.Status)
			require.Equal(t, jobErr, res.Job.Error)
			require.NotNil(t, res.Job.FinishedAt)
			require.Equal(t, res.Job, get(t, b, job))
			last := lastEvent(t, b, job)
			require.Equal(t, store.JobStatusFailed, last.Status)
			require.Contains(t, last.Message, "checked the dashboard")
			require.Contains(t, last.Message, "provider_failed: the provider never ran it")
		})

		t.Run("AnotherTargetIsAnError", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job := jobIn(t, b.factory, store.JobStatusOutcomeUnknown)
			events := requireConsecutiveEvents(t, b.store, job)
			for _, to := range []store.JobStatus{store.JobStatusRunning, store.JobStatusSucceeded, store.JobStatusCancelled, ""} {
				_, err := b.operator.JobResolve(b.ctx, &store.JobResolveParams{Tenant: job.Tenant, ID: job.ID, To: to})
				require.Error(t, err, "to %q", to)
			}
			requireUnchanged(t, b, job, events)
		})

	})

	t.Run("JobApprove", func(t *testing.T) {
		t.Parallel()

		t.Run("ApproveQueuesTheJobApproved", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job := jobIn(t, b.factory, store.JobStatusAwaitingApproval)
			res, err := approve(b, job, nil)
			require.NoError(t, err)
			require.False(t, res.Replayed)
			require.Equal(t, store.JobStatusQueued, res.Job.Status)
			require.True(t, res.Job.Approved)
			require.JSONEq(t, `{"plan": "pay 42"}`, string(res.Job.Output)) // the plan stays visible
			require.Nil(t, res.Job.FinishedAt)
			require.Equal(t, res.Job, get(t, b, job))
			last := lastEvent(t, b, job)
			require.Equal(t, store.JobStatusQueued, last.Status)
			require.Equal(t, "approved: looks right", last.Message)

			again := claimOne(t, b.engine, "w2", engineLease)
			require.Equal(t, job.ID, again.ID)
			require.True(t, again.Approved)
		})

		t.Run("RejectCancelsTheJob", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job := jobIn(t, b.factory, store.JobStatusAwaitingApproval)
			res, err := b.operator.JobApprove(b.ctx, &store.JobApproveParams{Tenant: job.Tenant, ID: job.ID, Approve: false, Message: "wrong payee"})
			require.NoError(t, err)
			require.Equal(t, store.JobStatusCancelled, res.Job.Status)
			require.False(t, res.Job.Approved)
			require.NotNil(t, res.Job.FinishedAt)
			require.Equal(t, res.Job, get(t, b, job))
			last := lastEvent(t, b, job)
			require.Equal(t, store.JobStatusCancelled, last.Status)
			require.Equal(t, "rejected: wrong payee", last.Message)
		})

	})

	t.Run("RefusedFromEveryOtherStatus", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		// Every call from every status its transition may not start from
		// (nor settle in) is refused, naming the status, and writes
		// nothing: not the job, not its events, not the key.
		for _, call := range []struct {
			name       string
			transition store.OperatorTransition
			call       func(*testBundle, *store.Job, *store.IdempotencyParams) (*store.OperatorResult, error)
		}{
			{"CancelJob", store.CancelTransition, cancel},
			{"ReplayJob", store.ReplayTransition, replay},
			{"ResolveJob", store.ResolveTransition, resolve},
			{"ApproveJob", store.ApproveTransition, approve},
		} {
			refused := 0
			for _, from := range allStatuses {
				if slices.Contains(call.transition.From, from) || from == call.transition.Settled {
					continue
				}
				refused++
				job := jobIn(t, b.factory, from)
				events := requireConsecutiveEvents(t, b.store, job)
				key := newIdempotency(t, call.name)
				_, err := call.call(b, job, key)
				require.ErrorIs(t, err, store.ErrTransitionRefused, "%s from %s", call.name, from)
				var refusal *store.TransitionRefusedError
				require.ErrorAs(t, err, &refusal)
				require.Equal(t, from, refusal.Status, "%s: the refusal names the job's status", call.name)
				requireUnchanged(t, b, job, events)

				// The key was not consumed: on a job the call may move, it
				// applies.
				other := jobIn(t, b.factory, call.transition.From[0])
				res, err := call.call(b, other, key)
				require.NoError(t, err, "%s", call.name)
				require.False(t, res.Replayed, "%s: a refused call took its key", call.name)
			}
			require.Positive(t, refused, call.name)
		}
	})

	t.Run("Idempotency", func(t *testing.T) {
		t.Parallel()

		t.Run("ReplayedKeyAppliesNothingAgain", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job := jobIn(t, b.factory, store.JobStatusDeadLettered)
			key := newIdempotency(t, "ReplayJob")
			first, err := replay(b, job, key)
			require.NoError(t, err)
			require.False(t, first.Replayed)
			require.Equal(t, store.JobStatusQueued, first.Job.Status)

			// The job runs and is dead-lettered again.
			running := claimOne(t, b.engine, "w", engineLease)
			_, err = b.engine.JobTransition(b.ctx, &store.JobTransitionParams{Lease: leaseOf(running), To: store.JobStatusDeadLettered, Message: "budget spent"})
			require.NoError(t, err)
			now := get(t, b, job)
			events := requireConsecutiveEvents(t, b.store, job)

			again, err := replay(b, job, key)
			require.NoError(t, err)
			require.True(t, again.Replayed)
			require.Equal(t, now, again.Job) // the job as it is now
			require.Equal(t, store.JobStatusDeadLettered, again.Job.Status)
			requireUnchanged(t, b, now, events)
		})

		t.Run("EveryMethodReplays", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			for _, step := range []struct {
				from store.JobStatus
				call func(*testBundle, *store.Job, *store.IdempotencyParams) (*store.OperatorResult, error)
			}{
				{store.JobStatusQueued, cancel},
				{store.JobStatusRunning, cancel},
				{store.JobStatusFailed, replay},
				{store.JobStatusOutcomeUnknown, resolve},
				{store.JobStatusAwaitingApproval, approve},
			} {
				job := jobIn(t, b.factory, step.from)
				key := newIdempotency(t, "Method")
				first, err := step.call(b, job, key)
				require.NoError(t, err, "from %s", step.from)
				require.False(t, first.Replayed)
				events := requireConsecutiveEvents(t, b.store, job)
				again, err := step.call(b, job, key)
				require.NoError(t, err, "from %s", step.from)
				require.True(t, again.Replayed, "from %s", step.from)
				require.Equal(t, first.Job, again.Job)
				requireUnchanged(t, b, first.Job, events)
				if first.Job.Status == store.JobStatusQueued {
					claimOne(t, b.engine, "w", engineLease) // out of jobIn's way
				}
			}
		})

		t.Run("KeyReusedForAnotherRequest", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job := jobIn(t, b.factory, store.JobStatusFailed)
			other := jobIn(t, b.factory, store.JobStatusDeadLettered)
			key := newIdempotency(t, "ReplayJob")
			_, err := replay(b, job, key)
			require.NoError(t, err)
			events := requireConsecutiveEvents(t, b.store, other)

			anotherFingerprint := *key
			anotherFingerprint.Fingerprint += "-changed"
			_, err = replay(b, job, &anotherFingerprint)
			require.ErrorIs(t, err, store.ErrIdempotencyKeyReused)

			// The same request body for another job is another request.
			_, err = replay(b, other, key)
			require.ErrorIs(t, err, store.ErrIdempotencyKeyReused)
			requireUnchanged(t, b, other, events)

			// Keys are scoped by method: there the key is new.
			otherMethod := *key
			otherMethod.Method = "/oncejob.v1.JobService/CancelJob"
			res, err := cancel(b, job, &otherMethod)
			require.NoError(t, err)
			require.False(t, res.Replayed)
			require.Equal(t, store.JobStatusCancelled, res.Job.Status)
		})

		t.Run("RefusedCallLeavesTheKeyFree", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job := jobIn(t, b.factory, store.JobStatusRunning)
			key := newIdempotency(t, "ApproveJob")
			_, err := approve(b, job, key)
			require.ErrorIs(t, err, store.ErrTransitionRefused)

			_, err = b.engine.JobTransition(b.ctx, &store.JobTransitionParams{
				Lease: leaseOf(job), To: store.JobStatusAwaitingApproval, Output: []byte(`{"plan": 1}`),
			})
			require.NoError(t, err)
			res, err := approve(b, job, key)
			require.NoError(t, err)
			require.False(t, res.Replayed)
			require.Equal(t, store.JobStatusQueued, res.Job.Status)
			require.True(t, res.Job.Approved)
		})

		t.Run("AnotherTenantOrNoJobIsNotFound", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job := jobIn(t, b.factory, store.JobStatusOutcomeUnknown)
			events := requireConsecutiveEvents(t, b.store, job)
			key := newIdempotency(t, "ResolveJob")
			for _, target := range []store.Job{
				{Tenant: "tenant-b", ID: job.ID},
				{Tenant: job.Tenant, ID: newUUID(t)},
				{Tenant: job.Tenant, ID: "not-a-uuid"},
			} {
				_, err := cancel(b, &target, key)
				require.ErrorIs(t, err, store.ErrNotFound, "%+v", target)
				_, err = replay(b, &target, key)
				require.ErrorIs(t, err, store.ErrNotFound, "%+v", target)
				_, err = resolve(b, &target, key)
				require.ErrorIs(t, err, store.ErrNotFound, "%+v", target)
				_, err = approve(b, &target, key)
				require.ErrorIs(t, err, store.ErrNotFound, "%+v", target)
			}
			requireUnchanged(t, b, job, events)

			// The key was not consumed by the calls that found nothing.
			res, err := resolve(b, job, key)
			require.NoError(t, err)
			require.False(t, res.Replayed)
			require.Equal(t, store.JobStatusQueued, res.Job.Status)
		})

		t.Run("ConcurrentCallsOfOneKeyApplyOnce", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			job := jobIn(t, b.factory, store.JobStatusDeadLettered)
			key := newIdempotency(t, "ReplayJob")
			const callers = 16
			results := make([]*store.OperatorResult, callers)
			errs := make([]error, callers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range callers {
				wg.Go(func() {
					<-start
					results[i], errs[i] = replay(b, job, key)
				})
			}
			close(start)
			wg.Wait()

			applied := 0
			for i := range callers {
				require.NoError(t, errs[i])
				require.Equal(t, job.ID, results[i].Job.ID)
				require.Equal(t, store.JobStatusQueued, results[i].Job.Status)
				if !results[i].Replayed {
					applied++
				}
			}
			require.Equal(t, 1, applied)
			events := requireConsecutiveEvents(t, b.store, job)
			require.Len(t, events, 3) // queued, dead_lettered (the factory's), replayed
		})
	})
}

// newIdempotency returns a fresh key of an operator method.
func newIdempotency(t *testing.T, method string) *store.IdempotencyParams {
	t.Helper()
	key := newUUID(t)
	return &store.IdempotencyParams{
		Method:      "/oncejob.v1.JobService/" + method,
		Key:         "key-" + key,
		Fingerprint: "fp-" + key,
	}
}
