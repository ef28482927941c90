package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// exerciseEngineBatch is the conformance suite of the batched engine's
// methods of store.EngineStore.
func exerciseEngineBatch(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()

	// claimAll submits n jobs and claims them all for owner.
	claimAll := func(t *testing.T, s Store, n int, owner string) []*store.Job {
		t.Helper()
		for range n {
			submit(t, s, newSubmitParams(t))
		}
		jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Owner: owner, Limit: n, LeaseDuration: engineLease})
		require.NoError(t, err)
		require.Len(t, jobs, n)
		return jobs
	}
	// takeOver expires job's lease and has another owner claim it; the
	// leases of others are extended first, so they are not taken too.
	takeOver := func(t *testing.T, s Store, job *store.Job, others ...*store.Job) *store.Job {
		t.Helper()
		later := job.LeaseUntil.Add(time.Hour)
		for _, o := range others {
			_, err := heartbeat(t.Context(), s, &heartbeatParams{Lease: leaseOf(o), LeaseDuration: engineLease, Now: &later})
			require.NoError(t, err)
		}
		taken := claimAt(t, s, "thief", *job.LeaseUntil)
		require.Len(t, taken, 1)
		require.Equal(t, job.ID, taken[0].ID)
		return taken[0]
	}
	stageCheckpoints := func(tag string) []store.StageCheckpoint {
		return []store.StageCheckpoint{
			{Stage: store.JobStageLLMDone, Chunk: -1, StageKey: "stage:v1:merge-" + tag, CodeVersion: "1", Output: []byte(`{"m":1}`), AdvanceStage: true, Message: "llm_done: computed"},
			{Stage: store.JobStageValidated, Chunk: -1, StageKey: "stage:v1:valid-" + tag, CodeVersion: "1", Output: []byte(`{"m":1}`), AdvanceStage: true, Message: "validated: computed"},
		}
	}

	t.Run("JobPublishMany", func(t *testing.T) {
		t.Parallel()

		t.Run("AFencedOutJobIsRefusedAloneAndTheOthersCommit", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			ctx := t.Context()
			jobs := claimAll(t, s, 3, "w")
			// The middle job's lease expires and another worker takes it:
			// its old owner's publish must be refused, the others commit.
			taken := takeOver(t, s, jobs[1], jobs[0], jobs[2])
			takenEvents := requireConsecutiveEvents(t, s, taken)

			params := &store.JobPublishManyParams{}
			for i, j := range jobs {
				params.Jobs = append(params.Jobs, &store.JobPublishParams{
					Lease: leaseOf(j), Output: []byte(`{"n":` + string(rune('0'+i)) + `}`), Message: "published",
					Checkpoints: stageCheckpoints(j.ID),
				})
			}
			res, err := s.JobPublishMany(ctx, params)
			require.NoError(t, err)
			require.Len(t, res.Items, 3)
			require.ErrorIs(t, res.Items[1].Err, store.ErrLeaseLost)
			require.Nil(t, res.Items[1].Job)

			for _, i := range []int{0, 2} {
				item := res.Items[i]
				require.NoError(t, item.Err)
				require.Equal(t, jobs[i].ID, item.Job.ID)
				require.Equal(t, store.JobStatusSucceeded, item.Job.Status)
				require.Equal(t, store.JobStagePublished, item.Job.Stage)
				require.JSONEq(t, string(params.Jobs[i].Output), string(item.Job.Output))
				require.Empty(t, item.Job.LeaseOwner)

				got, err := s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: jobs[i].Tenant, ID: jobs[i].ID})
				require.NoError(t, err)
				require.Equal(t, item.Job, got)

				// The checkpoints' events come before the published one,
				// consecutive after the claim's.
				events := requireConsecutiveEvents(t, s, got)
				require.Len(t, events, 5)
				require.Equal(t, []string{"queued/uploaded", "running/uploaded", "running/llm_done", "running/validated", "succeeded/published"}, statusStages(events))
				require.Equal(t, "validated: computed", events[3].Message)
				require.Equal(t, "published", events[4].Message)

				cps, err := s.CheckpointList(ctx, &store.CheckpointListParams{JobID: got.ID})
				require.NoError(t, err)
				require.Len(t, cps, 2)
				require.Equal(t, store.JobStageLLMDone, cps[0].Stage)
				require.Equal(t, store.JobStageValidated, cps[1].Stage)
				require.Equal(t, []byte(`{"m":1}`), cps[1].Output)
				require.Equal(t, got.Attempt, cps[1].Attempt)

				outbox, err := s.OutboxList(ctx, &store.OutboxListParams{JobID: got.ID})
				require.NoError(t, err)
				require.Len(t, outbox, 1)
				require.Equal(t, "job:"+got.ID+":job.succeeded:0", outbox[0].EventID)
			}

			// The refused job: untouched, still the thief's.
			got, err := s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: taken.Tenant, ID: taken.ID})
			require.NoError(t, err)
			require.Equal(t, store.JobStatusRunning, taken.ClaimedFrom, "the thief took it over")
			got.ClaimedFrom = taken.ClaimedFrom // the claim's, not the job's
			require.Equal(t, taken, got)
			require.Equal(t, takenEvents, requireConsecutiveEvents(t, s, taken))
			cps, err := s.CheckpointList(ctx, &store.CheckpointListParams{JobID: taken.ID})
			require.NoError(t, err)
			require.Empty(t, cps)
			outbox, err := s.OutboxList(ctx, &store.OutboxListParams{JobID: taken.ID})
			require.NoError(t, err)
			require.Empty(t, outbox)

			// Published twice: refused, nothing more written.
			again, err := s.JobPublishMany(ctx, &store.JobPublishManyParams{Jobs: params.Jobs[:1]})
			require.NoError(t, err)
			require.ErrorIs(t, again.Items[0].Err, store.ErrLeaseLost)
			require.Len(t, requireConsecutiveEvents(t, s, jobs[0]), 5)
		})

		t.Run("JobsOfOneDedupKeyInOneBatchComputeOnce", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			first := submit(t, s, newSubmitParams(t))
			params := newSubmitParams(t)
			params.DedupKey = first.DedupKey
			submit(t, s, params)
			jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Owner: "w", Limit: 2, LeaseDuration: engineLease})
			require.NoError(t, err)
			require.Len(t, jobs, 2)

			res, err := s.JobPublishMany(t.Context(), &store.JobPublishManyParams{Jobs: []*store.JobPublishParams{
				{Lease: leaseOf(jobs[0]), Output: []byte(`{"by":0}`), Message: "published"},
				{Lease: leaseOf(jobs[1]), Output: []byte(`{"by":1}`), Message: "published"},
			}})
			require.NoError(t, err)
			require.NoError(t, res.Items[0].Err)
			require.NoError(t, res.Items[1].Err)
			winner, loser := res.Items[0].Job, res.Items[1].Job
			if winner.DeduplicatedFrom != "" {
				winner, loser = loser, winner
			}
			require.Empty(t, winner.DeduplicatedFrom)
			require.Equal(t, winner.ID, loser.DeduplicatedFrom)
			require.JSONEq(t, string(winner.Output), string(loser.Output))
			requireConsecutiveEvents(t, s, winner)
			requireConsecutiveEvents(t, s, loser)
		})
	})

	t.Run("CheckpointWriteMany", func(t *testing.T) {
		t.Parallel()

		attempt := func(job *store.Job, key string) *store.LLMAttempt {
			return &store.LLMAttempt{
				JobID: job.ID, JobAttempt: job.Attempt, Stage: store.JobStageLLMDone, Chunk: 0,
				ProviderKey: key, Model: "m", Outcome: store.LLMOutcomeSucceeded, Billed: true,
				PromptTokens: 10, CompletionTokens: 5, CostMicros: 7, ProviderRequestID: "req-" + key,
			}
		}
		deterministic := []store.StageCheckpoint{
			{Stage: store.JobStageTextExtracted, Chunk: -1, StageKey: "stage:v1:t", CodeVersion: "1", Output: []byte("text"), AdvanceStage: true, Message: "text_extracted: computed"},
			{Stage: store.JobStageChunksReady, Chunk: -1, StageKey: "stage:v1:c", CodeVersion: "1", Output: []byte(`["text"]`), AdvanceStage: true, Message: "chunks_ready: computed"},
			{Stage: store.JobStageLLMDone, Chunk: 0, StageKey: "stage:v1:l", CodeVersion: "1", Output: []byte(`{"a":1}`)},
		}

		t.Run("WritesCheckpointsEventsAndTheJournalTogether", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			ctx := t.Context()
			job := claimAll(t, s, 1, "w")[0]

			require.NoError(t, s.CheckpointWriteMany(ctx, &store.CheckpointWriteManyParams{
				Lease: leaseOf(job), Checkpoints: deterministic, Attempt: attempt(job, "k1"),
			}))
			got, err := s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			require.Equal(t, store.JobStageChunksReady, got.Stage)
			require.EqualValues(t, 1, got.Usage.LLMCalls)
			require.EqualValues(t, 10, got.Usage.PromptTokens)
			events := requireConsecutiveEvents(t, s, got)
			require.Equal(t, []string{"queued/uploaded", "running/uploaded", "running/text_extracted", "running/chunks_ready"}, statusStages(events))
			cps, err := s.CheckpointList(ctx, &store.CheckpointListParams{JobID: job.ID})
			require.NoError(t, err)
			require.Len(t, cps, 3)
			require.Equal(t, []byte("text"), cps[0].Output)
			require.Equal(t, int32(0), cps[2].Chunk)
			journal, err := s.LLMAttemptList(ctx, &store.LLMAttemptListParams{JobID: job.ID})
			require.NoError(t, err)
			require.Len(t, journal, 1)
			require.True(t, journal[0].Billed)
			require.Equal(t, job.Tenant, journal[0].Tenant)

			found, err := s.CheckpointGetByStageKeys(ctx, &store.CheckpointGetByStageKeysParams{
				Tenant: job.Tenant, StageKeys: []string{"stage:v1:t", "stage:v1:l", "stage:v1:none"}, DedupKey: job.DedupKey,
			})
			require.NoError(t, err)
			require.Len(t, found.Checkpoints, 2)
			require.Equal(t, []byte("text"), found.Checkpoints["stage:v1:t"].Output)
			require.Equal(t, store.JobStageTextExtracted, found.Checkpoints["stage:v1:t"].Stage)
			require.Equal(t, job.ID, found.Checkpoints["stage:v1:l"].JobID)
			require.Equal(t, job.Tenant, found.Checkpoints["stage:v1:l"].Tenant)
			require.Empty(t, found.ComputedBy, "nothing published yet")
			other, err := s.CheckpointGetByStageKeys(ctx, &store.CheckpointGetByStageKeysParams{Tenant: "tenant-b", StageKeys: []string{"stage:v1:t"}})
			require.NoError(t, err)
			require.Empty(t, other.Checkpoints, "the decision cache never crosses tenants")

			// Published, the job is its dedup key's computed success.
			res, err := s.JobPublishMany(ctx, &store.JobPublishManyParams{Jobs: []*store.JobPublishParams{{Lease: leaseOf(job), Output: []byte(`{}`), Message: "published"}}})
			require.NoError(t, err)
			require.NoError(t, res.Items[0].Err)
			found, err = s.CheckpointGetByStageKeys(ctx, &store.CheckpointGetByStageKeysParams{Tenant: job.Tenant, StageKeys: []string{"stage:v1:t"}, DedupKey: job.DedupKey})
			require.NoError(t, err)
			require.Equal(t, job.ID, found.ComputedBy)
			require.Len(t, found.Checkpoints, 1)
		})

		t.Run("StageAdvancesWithoutAnEventAndACheckpointIsReplaced", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			ctx := t.Context()
			job := claimAll(t, s, 1, "w")[0]
			chunk := func(key, out string) []store.StageCheckpoint {
				return []store.StageCheckpoint{{Stage: store.JobStageLLMDone, Chunk: 0, StageKey: key, CodeVersion: "1", Output: []byte(out)}}
			}
			stageOf := func() store.JobStage {
				got, err := s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
				require.NoError(t, err)
				return got.Stage
			}

			require.NoError(t, s.CheckpointWriteMany(ctx, &store.CheckpointWriteManyParams{
				Lease: leaseOf(job), Checkpoints: chunk("stage:v1:l1", `{"a":1}`), Attempt: attempt(job, "k1"), Stage: store.JobStageChunksReady,
			}))
			require.Equal(t, store.JobStageChunksReady, stageOf())
			got, err := s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			require.Equal(t, []string{"queued/uploaded", "running/uploaded"}, statusStages(requireConsecutiveEvents(t, s, got)), "a stage-only advance appends no event")

			// The same (stage, chunk) under a new stage key replaces the row.
			require.NoError(t, s.CheckpointWriteMany(ctx, &store.CheckpointWriteManyParams{
				Lease: leaseOf(job), Checkpoints: chunk("stage:v1:l2", `{"a":2}`), Stage: store.JobStageLLMDone,
			}))
			require.Equal(t, store.JobStageLLMDone, stageOf())
			cps, err := s.CheckpointList(ctx, &store.CheckpointListParams{JobID: job.ID})
			require.NoError(t, err)
			require.Len(t, cps, 1)
			require.Equal(t, "stage:v1:l2", cps[0].StageKey)
			require.JSONEq(t, `{"a":2}`, string(cps[0].Output))

			// A stage alone is fenced: with the lease lost it is refused.
			taken := takeOver(t, s, job)
			err = s.CheckpointWriteMany(ctx, &store.CheckpointWriteManyParams{Lease: leaseOf(job), Stage: store.JobStageValidated})
			require.ErrorIs(t, err, store.ErrLeaseLost)
			require.Equal(t, taken.Stage, stageOf())
			require.NoError(t, s.CheckpointWriteMany(ctx, &store.CheckpointWriteManyParams{Lease: leaseOf(taken), Stage: store.JobStageValidated}))
			require.Equal(t, store.JobStageValidated, stageOf())
		})

		t.Run("ALostLeaseJournalsTheAttemptAndWritesNoCheckpoint", func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			ctx := t.Context()
			job := claimAll(t, s, 1, "w")[0]
			taken := takeOver(t, s, job)
			before := requireConsecutiveEvents(t, s, taken)

			err := s.CheckpointWriteMany(ctx, &store.CheckpointWriteManyParams{
				Lease: leaseOf(job), Checkpoints: deterministic, Attempt: attempt(job, "k1"),
			})
			require.ErrorIs(t, err, store.ErrLeaseLost)
			got, err := s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			require.Equal(t, taken.Stage, got.Stage)
			require.Equal(t, "thief", got.LeaseOwner)
			require.EqualValues(t, 1, got.Usage.LLMCalls, "the bill happened: it is counted")
			require.Equal(t, before, requireConsecutiveEvents(t, s, got))
			cps, err := s.CheckpointList(ctx, &store.CheckpointListParams{JobID: job.ID})
			require.NoError(t, err)
			require.Empty(t, cps)
			journal, err := s.LLMAttemptList(ctx, &store.LLMAttemptListParams{JobID: job.ID})
			require.NoError(t, err)
			require.Len(t, journal, 1)

			// The same bill journaled again (the new owner's replayed
			// answer) is not counted twice.
			require.NoError(t, s.CheckpointWriteMany(ctx, &store.CheckpointWriteManyParams{
				Lease: leaseOf(taken), Checkpoints: deterministic, Attempt: attempt(taken, "k1"),
			}))
			got, err = s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			require.EqualValues(t, 1, got.Usage.LLMCalls)
			require.Equal(t, store.JobStageChunksReady, got.Stage)
		})
	})

	t.Run("CheckpointWriteBatch", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		jobs := claimAll(t, s, 4, "w")
		// jobs[2]'s lease is taken over: its write is refused alone.
		taken := takeOver(t, s, jobs[2], jobs[0], jobs[1], jobs[3])
		before := requireConsecutiveEvents(t, s, taken)
		attempt := func(job *store.Job, key string) *store.LLMAttempt {
			return &store.LLMAttempt{
				JobID: job.ID, JobAttempt: job.Attempt, Stage: store.JobStageLLMDone, Chunk: 0,
				ProviderKey: key, Model: "m", Outcome: store.LLMOutcomeSucceeded, Billed: true,
				PromptTokens: 10, CompletionTokens: 5, CostMicros: 7, ProviderRequestID: "req-" + key,
			}
		}
		chunk := []store.StageCheckpoint{{Stage: store.JobStageLLMDone, Chunk: 0, StageKey: "stage:v1:l", CodeVersion: "1", Output: []byte(`{"a":1}`)}}
		// jobs[1] has a checkpoint its write replaces.
		require.NoError(t, s.CheckpointWriteMany(ctx, &store.CheckpointWriteManyParams{Lease: leaseOf(jobs[1]), Checkpoints: chunk}))
		res, err := s.CheckpointWriteBatch(ctx, &store.CheckpointWriteBatchParams{Writes: []*store.CheckpointWriteManyParams{
			{Lease: leaseOf(jobs[0]), Checkpoints: append(stageCheckpoints("0"), chunk...), Attempt: attempt(jobs[0], "k0")},
			{Lease: leaseOf(jobs[1]), Checkpoints: []store.StageCheckpoint{{Stage: store.JobStageLLMDone, Chunk: 0, StageKey: "stage:v1:l2", CodeVersion: "1", Output: []byte(`{"a":2}`)}}, Attempt: attempt(jobs[1], "k1"), Stage: store.JobStageChunksReady},
			{Lease: leaseOf(jobs[2]), Checkpoints: chunk, Attempt: attempt(jobs[2], "k2"), Stage: store.JobStageChunksReady},
			{Lease: leaseOf(jobs[3]), Stage: store.JobStageTextExtracted},
			{Lease: leaseOf(jobs[0])}, // twice in the batch
			{Lease: store.Lease{JobID: "not-a-job", Owner: "w", Attempt: 1}},
		}})
		require.NoError(t, err)
		require.Len(t, res.Errs, 6)
		require.NoError(t, res.Errs[0])
		require.NoError(t, res.Errs[1])
		require.ErrorIs(t, res.Errs[2], store.ErrLeaseLost)
		require.NoError(t, res.Errs[3])
		require.ErrorIs(t, res.Errs[4], store.ErrLeaseLost)
		require.ErrorIs(t, res.Errs[5], store.ErrLeaseLost)

		get := func(job *store.Job) *store.Job {
			got, err := s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			return got
		}
		journal := func(job *store.Job) []*store.LLMAttempt {
			j, err := s.LLMAttemptList(ctx, &store.LLMAttemptListParams{JobID: job.ID})
			require.NoError(t, err)
			return j
		}
		cpsOf := func(job *store.Job) []*store.Checkpoint {
			cps, err := s.CheckpointList(ctx, &store.CheckpointListParams{JobID: job.ID})
			require.NoError(t, err)
			return cps
		}

		got := get(jobs[0])
		require.Equal(t, store.JobStageValidated, got.Stage)
		require.EqualValues(t, 1, got.Usage.LLMCalls)
		require.Equal(t, []string{"queued/uploaded", "running/uploaded", "running/llm_done", "running/validated"}, statusStages(requireConsecutiveEvents(t, s, got)))
		require.Len(t, cpsOf(jobs[0]), 3)
		require.Len(t, journal(jobs[0]), 1)

		got = get(jobs[1])
		require.Equal(t, store.JobStageChunksReady, got.Stage, "a stage-only advance")
		require.EqualValues(t, 1, got.Usage.LLMCalls)
		require.Equal(t, []string{"queued/uploaded", "running/uploaded"}, statusStages(requireConsecutiveEvents(t, s, got)))
		cps := cpsOf(jobs[1])
		require.Len(t, cps, 1)
		require.Equal(t, "stage:v1:l2", cps[0].StageKey)
		require.JSONEq(t, `{"a":2}`, string(cps[0].Output))

		got = get(jobs[2])
		require.Equal(t, taken.Stage, got.Stage)
		require.Equal(t, "thief", got.LeaseOwner)
		require.EqualValues(t, 1, got.Usage.LLMCalls, "the bill happened: it is counted")
		require.Equal(t, before, requireConsecutiveEvents(t, s, got))
		require.Empty(t, cpsOf(jobs[2]))
		require.Len(t, journal(jobs[2]), 1, "the journal outlives the lease")

		require.Equal(t, store.JobStageTextExtracted, get(jobs[3]).Stage)
		require.Empty(t, journal(jobs[3]))

		// Journaled again under the new lease, the bill is not counted twice.
		res, err = s.CheckpointWriteBatch(ctx, &store.CheckpointWriteBatchParams{Writes: []*store.CheckpointWriteManyParams{
			{Lease: leaseOf(taken), Checkpoints: chunk, Attempt: attempt(taken, "k2")},
			{Lease: leaseOf(jobs[3]), Checkpoints: chunk},
		}})
		require.NoError(t, err)
		require.Equal(t, []error{nil, nil}, res.Errs)
		require.EqualValues(t, 1, get(taken).Usage.LLMCalls)
		require.Len(t, cpsOf(taken), 1)
		require.Len(t, cpsOf(jobs[3]), 1)
	})

	t.Run("JobHeartbeatMany", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		jobs := claimAll(t, s, 3, "w")
		taken := takeOver(t, s, jobs[2], jobs[0], jobs[1])
		_, err := s.JobCancel(ctx, &store.JobCancelParams{Tenant: jobs[1].Tenant, ID: jobs[1].ID, Message: "stop"})
		require.NoError(t, err)

		at := time.Now().Add(time.Hour)
		var res *store.JobHeartbeatManyResult
		res, err = s.JobHeartbeatMany(ctx, &store.JobHeartbeatManyParams{
			Leases: []store.Lease{leaseOf(jobs[0]), leaseOf(jobs[1]), leaseOf(jobs[2])}, LeaseDuration: engineLease, Now: &at,
		})
		require.NoError(t, err)
		require.Equal(t, []store.Lease{leaseOf(jobs[2])}, res.Lost)
		require.Equal(t, []string{jobs[1].ID}, res.CancelRequested)
		got, err := s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: jobs[0].Tenant, ID: jobs[0].ID})
		require.NoError(t, err)
		require.WithinDuration(t, at.Add(engineLease), *got.LeaseUntil, time.Millisecond)
		still, err := s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: taken.Tenant, ID: taken.ID})
		require.NoError(t, err)
		require.Equal(t, taken.LeaseUntil, still.LeaseUntil)
	})

	t.Run("JobClaimWorkReturnsTheDocuments", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		params := newSubmitParams(t)
		submit(t, s, params)
		work, err := s.JobClaimWork(t.Context(), &store.JobClaimParams{Owner: "w", Limit: 5, LeaseDuration: engineLease})
		require.NoError(t, err)
		require.Len(t, work, 1)
		require.Equal(t, params.ID, work[0].Job.ID)
		require.Equal(t, params.Document, work[0].Document)
		require.True(t, work[0].CheckpointsRead)
		require.Empty(t, work[0].Checkpoints, "a first attempt has none")

		// Taken over after its checkpoints: the claim returns them, in
		// CheckpointList's order.
		job := work[0].Job
		require.NoError(t, s.CheckpointWriteMany(t.Context(), &store.CheckpointWriteManyParams{Lease: leaseOf(job), Checkpoints: []store.StageCheckpoint{
			{Stage: store.JobStageLLMDone, Chunk: 0, StageKey: "stage:v1:l", CodeVersion: "1", Output: []byte(`{}`)},
			{Stage: store.JobStageTextExtracted, Chunk: -1, StageKey: "stage:v1:t", CodeVersion: "1", Output: []byte("t"), AdvanceStage: true, Message: "m"},
		}}))
		want, err := s.CheckpointList(t.Context(), &store.CheckpointListParams{JobID: job.ID})
		require.NoError(t, err)
		require.Len(t, want, 2)
		at := *job.LeaseUntil
		again, err := s.JobClaimWork(t.Context(), &store.JobClaimParams{Owner: "w2", Limit: 5, LeaseDuration: engineLease, Now: &at})
		require.NoError(t, err)
		require.Len(t, again, 1)
		require.Equal(t, int32(2), again[0].Job.Attempt)
		require.True(t, again[0].CheckpointsRead)
		require.Equal(t, want, again[0].Checkpoints)
		require.Equal(t, params.Document, again[0].Document)
	})
}

func statusStages(events []*store.JobEvent) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = string(e.Status) + "/" + string(e.Stage)
	}
	return out
}
