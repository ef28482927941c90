package storepg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// Every method below is one statement, so one round trip and one implicit
// transaction: the fenced ones check the lease in the UPDATE that takes the
// job's row lock and write everything else from that UPDATE's result.

// JobClaim implements store.EngineStore.
func (s *Store) JobClaim(ctx context.Context, params *store.JobClaimParams) ([]*store.Job, error) {
	if params.Limit <= 0 {
		return nil, nil
	}
	rows, err := s.q.JobClaim(ctx, s.hot(ctx), dbsqlc.JobClaimParams{
		Now:              params.Now,
		Max:              int64(min(params.Limit, 1<<31-1)),
		Owner:            params.Owner,
		LeaseDuration:    interval(params.LeaseDuration),
		TakeoverMessage:  store.ClaimMessage(store.JobStatusRunning, ""),
		ReconcileMessage: store.ClaimMessage(store.JobStatusOutcomeUnknown, ""),
		ClaimMessage:     store.ClaimMessage(store.JobStatusQueued, ""),
	})
	if err != nil {
		return nil, interpretError(err)
	}
	jobs := make([]*store.Job, len(rows))
	for i, row := range rows {
		s.eventCommitted(row.Tenant, row.ID, row.LastEventSeq)
		if jobs[i], err = jobFromRow(jobFromClaimRow(row)); err != nil {
			return nil, err
		}
		jobs[i].ClaimedFrom = store.JobStatus(row.ClaimedFrom)
	}
	if err := s.runs.Apply(ctx, jobs...); err != nil {
		return nil, err
	}
	return jobs, nil
}

// jobFromClaimRow is the job of a claimed row, which carries the status it
// was claimed from beside the job's columns.
func jobFromClaimRow(row dbsqlc.JobClaimRow) dbsqlc.Job {
	return dbsqlc.Job{
		ID:                row.ID,
		Tenant:            row.Tenant,
		IdempotencyKey:    row.IdempotencyKey,
		DedupKey:          row.DedupKey,
		Pipeline:          row.Pipeline,
		PipelineVersion:   row.PipelineVersion,
		PromptVersion:     row.PromptVersion,
		ModelProfile:      row.ModelProfile,
		Status:            row.Status,
		Stage:             row.Stage,
		Attempt:           row.Attempt,
		Output:            row.Output,
		Error:             row.Error,
		DeduplicatedFrom:  row.DeduplicatedFrom,
		DocumentSha256:    row.DocumentSha256,
		DocumentMediaType: row.DocumentMediaType,
		DocumentName:      row.DocumentName,
		DocumentSizeBytes: row.DocumentSizeBytes,
		Params:            row.Params,
		Labels:            row.Labels,
		PromptTokens:      row.PromptTokens,
		CompletionTokens:  row.CompletionTokens,
		CostMicros:        row.CostMicros,
		LlmCalls:          row.LlmCalls,
		LastEventSeq:      row.LastEventSeq,
		LeaseOwner:        row.LeaseOwner,
		LeaseUntil:        row.LeaseUntil,
		CreatedAt:         row.CreatedAt,
		UpdatedAt:         row.UpdatedAt,
		FinishedAt:        row.FinishedAt,
		RunAfter:          row.RunAfter,
		CancelRequested:   row.CancelRequested,
		BudgetStartedAt:   row.BudgetStartedAt,
		BudgetAttempts:    row.BudgetAttempts,
		BudgetTokens:      row.BudgetTokens,
		Approved:          row.Approved,
		Generation:        row.Generation,
		Traceparent:       row.Traceparent,
		RunID:             row.RunID,
		Priority:          row.Priority,
	}
}

// LLMAttemptRecord implements store.EngineStore.
func (s *Store) LLMAttemptRecord(ctx context.Context, params *store.LLMAttemptRecordParams) error {
	a := &params.Attempt
	id, err := parseUUID(a.JobID)
	if err != nil {
		return store.ErrNotFound
	}
	args := dbsqlc.LLMAttemptRecordParams{
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
		Model:             a.Model,
		PriceClass:        string(a.PriceClass.Or()),
		JobID:             id,
	}
	if f := params.Fence; f != nil {
		if f.JobID != a.JobID {
			return store.ErrLeaseLost
		}
		args.Fenced, args.Owner, args.LeaseAttempt = true, f.Owner, int64(f.Attempt)
	}
	_, err = s.q.LLMAttemptRecord(ctx, s.pool, args)
	if isBilledOnceViolation(err) {
		// A concurrent attempt counted this key's bill first.
		args.Billed = false
		_, err = s.q.LLMAttemptRecord(ctx, s.pool, args)
	}
	if args.Fenced && errors.Is(err, pgx.ErrNoRows) {
		return store.ErrLeaseLost
	}
	return interpretError(err)
}

// isBilledOnceViolation: another attempt journaled this provider call's
// bill first (the llm_attempts_billed_once index).
func isBilledOnceViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgUniqueViolation && pgErr.ConstraintName == "llm_attempts_billed_once"
}

func isComputedSuccessViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgUniqueViolation && pgErr.ConstraintName == constraintComputedSuccess
}

// JobTransition implements store.EngineStore.
func (s *Store) JobTransition(ctx context.Context, params *store.JobTransitionParams) (*store.Job, error) {
	w, err := params.Write()
	if err != nil {
		return nil, err
	}
	id, err := parseUUID(params.Lease.JobID)
	if err != nil {
		return nil, store.ErrLeaseLost
	}
	row, err := s.q.JobTransition(ctx, s.pool, dbsqlc.JobTransitionParams{
		Parks:    w.Parks,
		Status:   string(w.To),
		Error:    rowmap.StringOrNil(w.Error),
		Output:   rowmap.StringOrNil(w.Output),
		RunAfter: w.RunAfter,
		Finished: w.Finished,
		JobID:    id,
		Owner:    params.Lease.Owner,
		Attempt:  int64(params.Lease.Attempt),
		Message:  w.Message,

		CancelledMessage: w.CancelledMessage,
		RefundAttempt:    w.RefundAttempt,
	})
	if err != nil {
		return nil, interpretLeaseError(err)
	}
	s.eventCommitted(row.Tenant, row.ID, row.LastEventSeq)
	return s.job(ctx, dbsqlc.Job(row))
}

// OutboxList implements store.EngineStore.
func (s *Store) OutboxList(ctx context.Context, params *store.OutboxListParams) ([]*store.OutboxEvent, error) {
	id, err := parseUUID(params.JobID)
	if err != nil {
		return nil, nil
	}
	rows, err := s.q.OutboxList(ctx, s.pool, id)
	return rowmap.Map(rows, err, interpretError, func(r dbsqlc.OutboxListRow) *store.OutboxEvent {
		e := outboxFromRow(r.Outbox)
		e.RoutedAt = nil
		if !r.Unrouted {
			e.RoutedAt = &r.Routed
		}
		return e
	})
}

func checkpointFromRow(r dbsqlc.JobCheckpoint) *store.Checkpoint {
	return columns.Checkpoint(rowmap.CheckpointRow[time.Time](r))
}

// interpretLeaseError is interpretError for fenced statements, whose "no
// row" means the fence held the write back.
func interpretLeaseError(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrLeaseLost
	}
	return interpretError(err)
}

func interval(d time.Duration) pgtype.Interval {
	return pgtype.Interval{Microseconds: d.Microseconds(), Valid: true}
}
