package storesqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// Every write below is one write transaction on the single writer. Where
// Postgres needs one statement (or FOR UPDATE SKIP LOCKED) so that no other
// transaction slips in between the fence and the writes it guards, SQLite
// needs nothing: no other write runs until the transaction ends. The fenced
// methods check the lease in the UPDATE of the job first; no row is
// ErrLeaseLost and the transaction rolls back with nothing written. Lease
// times are the store's clock plus the duration, in unix microseconds.

// JobClaim implements store.EngineStore: the candidates in the order they
// became claimable, then one update and one event each, in one write
// transaction, so concurrent claimers take turns and never share a job.
func (s *Store) JobClaim(ctx context.Context, params *store.JobClaimParams) ([]*store.Job, error) {
	if params.Limit <= 0 {
		return nil, nil
	}
	var jobs []*store.Job
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		at := nowOr(params.Now, now)
		candidates, err := s.q.JobClaimCandidates(ctx, tx, dbsqlite.JobClaimCandidatesParams{
			Now: at,
			Max: int64(params.Limit),
		})
		if err != nil {
			return interpretError(err)
		}
		jobs = make([]*store.Job, 0, len(candidates))
		for _, c := range candidates {
			row, err := s.q.JobClaim(ctx, tx, dbsqlite.JobClaimParams{
				Owner:      new(params.Owner),
				LeaseUntil: new(at + params.LeaseDuration.Microseconds()),
				Now:        now,
				ID:         c.ID,
			})
			if err != nil {
				return interpretError(err)
			}
			if err := s.jobEventAppend(ctx, tx, row.ID, store.ClaimMessage(store.JobStatus(c.Status), rowmap.Deref(c.LeaseOwner))); err != nil {
				return err
			}
			job, err := jobFromRow(row)
			if err != nil {
				return err
			}
			job.ClaimedFrom = store.JobStatus(c.Status)
			jobs = append(jobs, job)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(jobs, func(a, b *store.Job) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	if err := s.runs.Apply(ctx, jobs...); err != nil {
		return nil, err
	}
	return jobs, nil
}

// checkpointWriteTx writes one checkpoint of job id in tx, fenced by lease:
// the fence (advancing the stage when asked to), the checkpoint, its event.
func (s *Store) checkpointWriteTx(ctx context.Context, tx *writeTx, now int64, lease store.Lease, id string, cp store.StageCheckpoint) error {
	job, err := s.checkpointFence(ctx, tx, lease, cp, id, now)
	if err != nil {
		return interpretLeaseError(err)
	}
	err = s.q.CheckpointUpsert(ctx, tx, dbsqlite.CheckpointUpsertParams{
		JobID:       id,
		Tenant:      job.Tenant,
		Stage:       string(cp.Stage),
		Chunk:       int64(cp.Chunk),
		StageKey:    cp.StageKey,
		CodeVersion: cp.CodeVersion,
		Attempt:     job.Attempt,
		Output:      rowmap.NonNilSlice(cp.Output),
		CreatedAt:   now,
		ReusedFrom:  cp.ReusedFrom,
	})
	if err != nil {
		return interpretError(err)
	}
	if !cp.AdvanceStage {
		return nil
	}
	return s.jobEventAppend(ctx, tx, id, cp.Message)
}

// checkpointFence checks the lease of a checkpoint write in the UPDATE of its
// job, advancing the job's stage when asked to.
func (s *Store) checkpointFence(ctx context.Context, tx *writeTx, lease store.Lease, cp store.StageCheckpoint, id string, now int64) (dbsqlite.JobCheckpointFenceRow, error) {
	if cp.AdvanceStage {
		row, err := s.q.JobStageAdvance(ctx, tx, dbsqlite.JobStageAdvanceParams{
			Stage:   string(cp.Stage),
			Now:     now,
			ID:      id,
			Owner:   new(lease.Owner),
			Attempt: int64(lease.Attempt),
		})
		return dbsqlite.JobCheckpointFenceRow(row), err
	}
	return s.q.JobCheckpointFence(ctx, tx, dbsqlite.JobCheckpointFenceParams{
		Now:     now,
		ID:      id,
		Owner:   new(lease.Owner),
		Attempt: int64(lease.Attempt),
	})
}

// LLMAttemptRecord implements store.EngineStore. The insert decides whether
// the attempt is billed (its provider key's first bill), and only a billed
// one adds usage. In Postgres the unique index llm_attempts_billed_once
// settles two inserts racing; here writes take turns, so the insert's check
// (a lookup on that index) always sees the earlier bill, and the index only
// backs the rule up.
func (s *Store) LLMAttemptRecord(ctx context.Context, params *store.LLMAttemptRecordParams) error {
	a := &params.Attempt
	id, ok := canonicalUUID(a.JobID)
	if !ok {
		return store.ErrNotFound
	}
	return s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		if f := params.Fence; f != nil {
			if f.JobID != a.JobID {
				return store.ErrLeaseLost
			}
			_, err := s.q.JobCheckpointFence(ctx, tx, dbsqlite.JobCheckpointFenceParams{Now: now, ID: id, Owner: new(f.Owner), Attempt: int64(f.Attempt)})
			if errors.Is(err, sql.ErrNoRows) {
				return store.ErrLeaseLost
			}
			if err != nil {
				return interpretError(err)
			}
		}
		return s.llmAttemptRecordTx(ctx, tx, now, id, a)
	})
}

// llmAttemptRecordTx journals a in tx and adds its usage when billed.
func (s *Store) llmAttemptRecordTx(ctx context.Context, tx *writeTx, now int64, id string, a *store.LLMAttempt) error {
	attempt, err := s.q.LLMAttemptInsert(ctx, tx, dbsqlite.LLMAttemptInsertParams{
		JobAttempt:        int64(a.JobAttempt),
		Stage:             string(a.Stage),
		Chunk:             int64(a.Chunk),
		ProviderKey:       a.ProviderKey,
		Outcome:           string(a.Outcome),
		Billed:            a.Billed,
		PromptTokens:      a.PromptTokens,
		CompletionTokens:  a.CompletionTokens,
		CostMicros:        a.CostMicros,
		LatencyMs:         a.LatencyMillis,
		ProviderRequestID: a.ProviderRequestID,
		Error:             a.Error,
		CreatedAt:         now,
		Model:             a.Model,
		PriceClass:        string(a.PriceClass.Or()),
		JobID:             id,
	})
	if err != nil {
		return interpretError(err) // no row: no such job
	}
	if !attempt.Billed {
		return nil
	}
	return interpretError(s.q.JobUsageAdd(ctx, tx, dbsqlite.JobUsageAddParams{
		PromptTokens:     a.PromptTokens,
		CompletionTokens: a.CompletionTokens,
		CostMicros:       a.CostMicros,
		Now:              now,
		ID:               id,
	}))
}

// publishTx publishes job id in tx, fenced by params.Lease, after writing
// params.Checkpoints: one job of JobPublishMany. The transaction reads the
// computed success of the job's dedup key before it writes, and no other
// write runs in between, so two publishers of one key cannot both compute
// it; should the unique index of computed successes refuse the update all
// the same, JobPublishMany runs it once more and it publishes as
// deduplicated, as Postgres's does.
func (s *Store) publishTx(ctx context.Context, tx *writeTx, now int64, id string, params *store.JobPublishParams) (dbsqlite.Job, error) {
	for _, cp := range params.Checkpoints {
		if err := s.checkpointWriteTx(ctx, tx, now, params.Lease, id, cp); err != nil {
			return dbsqlite.Job{}, err
		}
	}
	var output *string // nil output, NULL column, as in Postgres
	if params.Output != nil {
		output = new(string(params.Output))
	}
	args := dbsqlite.JobPublishParams{
		Output:  output,
		Now:     now,
		ID:      id,
		Owner:   new(params.Lease.Owner),
		Attempt: int64(params.Lease.Attempt),
	}
	source, err := s.q.JobPublishSource(ctx, tx, id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return dbsqlite.Job{}, interpretError(err)
	default:
		args.DeduplicatedFrom = &source.ID
		if source.Output != nil {
			args.Output = source.Output
		}
	}
	row, err := s.q.JobPublish(ctx, tx, args)
	if err != nil {
		return dbsqlite.Job{}, interpretLeaseError(err)
	}
	return row, s.jobEventAppend(ctx, tx, row.ID, store.PublishMessage(params.Message, rowmap.Deref(row.DeduplicatedFrom)))
}

// JobTransition implements store.EngineStore.
func (s *Store) JobTransition(ctx context.Context, params *store.JobTransitionParams) (*store.Job, error) {
	w, err := params.Write()
	if err != nil {
		return nil, err
	}
	id, ok := canonicalUUID(params.Lease.JobID)
	if !ok {
		return nil, store.ErrLeaseLost
	}
	var row dbsqlite.Job
	err = s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		var finishedAt *int64
		if w.Finished {
			finishedAt = &now
		}
		var err error
		row, err = s.q.JobTransition(ctx, tx, dbsqlite.JobTransitionParams{
			Parks:         w.Parks,
			RefundAttempt: w.RefundAttempt,
			Status:        string(w.To),
			Error:         rowmap.StringOrNil(w.Error),
			Output:        rowmap.StringOrNil(w.Output),
			RunAfter:      microsOrNil(w.RunAfter),
			FinishedAt:    finishedAt,
			Now:           now,
			ID:            id,
			Owner:         new(params.Lease.Owner),
			Attempt:       int64(params.Lease.Attempt),
		})
		if err != nil {
			return interpretLeaseError(err)
		}
		message := w.Message
		if row.Status != string(w.To) {
			message = w.CancelledMessage
		}
		return s.jobEventAppend(ctx, tx, row.ID, message)
	})
	if err != nil {
		return nil, err
	}
	return s.job(ctx, row)
}

// OutboxList implements store.EngineStore.
func (s *Store) OutboxList(ctx context.Context, params *store.OutboxListParams) ([]*store.OutboxEvent, error) {
	id, ok := canonicalUUID(params.JobID)
	if !ok {
		return nil, nil
	}
	rows, err := s.q.OutboxList(ctx, s.read, id)
	return rowmap.Map(rows, err, interpretError, outboxFromRow)
}

func checkpointFromRow(r dbsqlite.JobCheckpoint) *store.Checkpoint {
	return columns.Checkpoint(rowmap.CheckpointRow[int64](r))
}

// nowOr is the time a claim or heartbeat runs at: the caller's Now when
// set, else the transaction's.
func nowOr(t *time.Time, now int64) int64 {
	if t == nil {
		return now
	}
	return t.UnixMicro()
}

// microsOrNil is the stored form of a nullable time.
func microsOrNil(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	return new(t.UnixMicro())
}

// nilIfEmpty is NULL for an empty string.
func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
