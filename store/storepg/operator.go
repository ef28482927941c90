package storepg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// Every operator call is one READ COMMITTED transaction of at most four
// statements (see internal/dbsqlc/operator.sql):
//
//  1. With an idempotency key, the key is inserted first, ON CONFLICT DO
//     NOTHING. The insert waits for a concurrent transaction inserting the
//     same key, so of concurrent callers exactly one goes on; the others read
//     the key in a statement of their own, which sees the winner's commit, and
//     return the job as it is now, Replayed, having applied nothing.
//  2. The transition: one conditional UPDATE on the statuses it may start
//     from, tenant-scoped, appending its event with last_event_seq + 1 in the
//     same statement.
//  3. Only when the UPDATE matched no row: the job is read FOR UPDATE to tell
//     ErrNotFound from ErrTransitionRefused. Both roll back, so the key is
//     not consumed and a later call with it may still succeed. (A cancel of
//     a cancelled job is a success: it commits, key included.)

// operatorKeyAttempts bounds the retries of the key insert when the janitor
// frees a key between the insert that found it and the read of it.
const operatorKeyAttempts = 3

// operation is one operator transition, run by operate.
type operation struct {
	store.OperatorTransition
	store.OperatorTarget
	// message is the event's, for the audit event of a cancel request.
	message string
	// apply is the conditional UPDATE; pgx.ErrNoRows when it matched no row.
	apply func(ctx context.Context, tx pgx.Tx, id string) (dbsqlc.Job, error)
}

// JobCancel implements store.OperatorStore. A running job only gets
// cancel_requested: that is no status transition, so no event is appended;
// the worker's settle to cancelled appends one.
func (s *Store) JobCancel(ctx context.Context, params *store.JobCancelParams) (*store.OperatorResult, error) {
	return s.operate(ctx, operation{
		OperatorTransition: store.CancelTransition,
		OperatorTarget:     params.Target(),
		message:            params.EventMessage(),
		apply: func(ctx context.Context, tx pgx.Tx, id string) (dbsqlc.Job, error) {
			row, err := s.q.JobCancel(ctx, tx, dbsqlc.JobCancelParams{
				Tenant:       params.Tenant,
				ID:           id,
				FromStatuses: store.CancelTransition.FromStrings(),
				Message:      params.EventMessage(),
			})
			return dbsqlc.Job(row), err
		},
	})
}

// JobReplay implements store.OperatorStore. The attempt is not reset: it is
// the fencing token.
func (s *Store) JobReplay(ctx context.Context, params *store.JobReplayParams) (*store.OperatorResult, error) {
	w, err := params.Write()
	if err != nil {
		return nil, err
	}
	return s.operate(ctx, operation{
		OperatorTransition: store.ReplayTransition,
		OperatorTarget:     params.Target(),
		apply: func(ctx context.Context, tx pgx.Tx, id string) (dbsqlc.Job, error) {
			row, err := s.q.JobReplay(ctx, tx, dbsqlc.JobReplayParams{
				ResetStages:  w.ResetStages,
				ResetStage:   w.ResetStage,
				Tenant:       params.Tenant,
				ID:           id,
				FromStatuses: store.ReplayTransition.FromStrings(),
				Message:      w.Message,
			})
			return dbsqlc.Job(row), err
		},
	})
}

// settle runs JobSettle as an operation.
func (s *Store) settle(ctx context.Context, target store.OperatorTarget, w *store.JobSettleWrite) (*store.OperatorResult, error) {
	return s.operate(ctx, operation{
		OperatorTransition: w.OperatorTransition,
		OperatorTarget:     target,
		apply: func(ctx context.Context, tx pgx.Tx, id string) (dbsqlc.Job, error) {
			row, err := s.q.JobSettle(ctx, tx, dbsqlc.JobSettleParams{
				Status:       string(w.To),
				Error:        rowmap.StringOrNil(w.Error),
				Approved:     w.Approved,
				FreshBudget:  w.FreshBudget,
				Finished:     w.Finished,
				Tenant:       target.Tenant,
				ID:           id,
				FromStatuses: w.FromStrings(),
				Message:      w.Message,
			})
			return dbsqlc.Job(row), err
		},
	})
}

// operate runs op in one transaction: the key, then the transition.
func (s *Store) operate(ctx context.Context, op operation) (*store.OperatorResult, error) {
	id, err := parseUUID(op.ID)
	if err != nil {
		return nil, store.ErrNotFound // no job has an id that is not a uuid
	}
	var (
		row      dbsqlc.Job
		replayed bool
		appended bool // an event was appended, to announce
	)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
		if op.Idempotency != nil {
			seen, err := s.operatorKeyTake(ctx, tx, op.Tenant, id, op.Idempotency)
			if err != nil {
				return err
			}
			if seen {
				replayed = true
				row, err = s.q.JobGetByID(ctx, tx, dbsqlc.JobGetByIDParams{Tenant: op.Tenant, ID: id})
				return err
			}
		}
		var applied bool
		row, appended, applied, err = s.operateApply(ctx, tx, op, id)
		if err != nil || !applied || op.Actor == nil {
			return err
		}
		row, err = s.audit(ctx, tx, op, row, appended)
		appended = true
		return err
	})
	switch {
	case errors.Is(err, store.ErrTransitionRefused), errors.Is(err, store.ErrIdempotencyKeyReused):
		return nil, err
	case err != nil:
		return nil, interpretError(err)
	}
	if appended {
		s.eventCommitted(row.Tenant, row.ID, row.LastEventSeq)
	}
	job, err := s.job(ctx, row)
	if err != nil {
		return nil, err
	}
	return &store.OperatorResult{Job: job, Replayed: replayed}, nil
}

// operatorKeyTake inserts the key, or reports that it was taken before by the
// same request. A key bound to another fingerprint or another job is
// ErrIdempotencyKeyReused. Like operateApply, it returns driver errors as
// they are; operate interprets them.
func (s *Store) operatorKeyTake(ctx context.Context, tx pgx.Tx, tenant string, id string, idem *store.IdempotencyParams) (seen bool, err error) {
	for range operatorKeyAttempts {
		_, err := s.q.IdempotencyKeyInsert(ctx, tx, dbsqlc.IdempotencyKeyInsertParams{
			Tenant:      tenant,
			Method:      idem.Method,
			IdemKey:     idem.Key,
			Fingerprint: idem.Fingerprint,
			JobID:       id,
		})
		if err == nil {
			return false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return false, err
		}
		key, err := s.q.IdempotencyKeyGet(ctx, tx, dbsqlc.IdempotencyKeyGetParams{
			Tenant:  tenant,
			Method:  idem.Method,
			IdemKey: idem.Key,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			continue // freed in between: the key is new again
		}
		if err != nil {
			return false, err
		}
		return true, idem.CheckKey(key.Fingerprint, key.JobID, id)
	}
	return false, fmt.Errorf("idempotency key freed and taken again %d times in a row", operatorKeyAttempts)
}

// operateApply runs op's UPDATE. When it matches no row, the job is locked
// and read, and op's Refuse decides: absent is ErrNotFound; a status op may
// start from means the job changed after the UPDATE's snapshot, so under
// the lock the UPDATE runs again and now matches; a settled job is returned
// as it is; any other status is refused. appended reports whether an event
// was appended: not for a job returned as it is, nor for a cancel request
// to a running job (no transition).
func (s *Store) operateApply(ctx context.Context, tx pgx.Tx, op operation, id string) (row dbsqlc.Job, appended, applied bool, err error) {
	for range 2 {
		row, err := op.apply(ctx, tx, id)
		if err == nil {
			return row, row.Status != string(store.JobStatusRunning), true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return dbsqlc.Job{}, false, false, err
		}
		// No row, so no such job: ErrNotFound by interpretError.
		current, err := s.q.JobGetByIDForUpdate(ctx, tx, dbsqlc.JobGetByIDForUpdateParams{Tenant: op.Tenant, ID: id})
		if err != nil {
			return dbsqlc.Job{}, false, false, err
		}
		switch refusal, err := op.Refuse(store.JobStatus(current.Status)); refusal {
		case store.RefusalRaced:
			continue
		case store.RefusalSettled:
			return current, false, false, nil
		default:
			return dbsqlc.Job{}, false, false, err
		}
	}
	return dbsqlc.Job{}, false, false, errors.New("operator transition matched no row under the job's lock")
}

// audit records op's actor, in op's transaction: on the event the
// transition appended, or, when it appended none (a cancel asked of a
// running job), on an event of its own.
func (s *Store) audit(ctx context.Context, tx pgx.Tx, op operation, row dbsqlc.Job, appended bool) (dbsqlc.Job, error) {
	if !appended {
		r, err := s.q.JobEventAppendAudit(ctx, tx, dbsqlc.JobEventAppendAuditParams{
			JobID:     row.ID,
			Message:   op.message,
			ActorKey:  op.Actor.KeyPrefix,
			ActorRole: string(op.Actor.Role),
			ActorRpc:  op.Actor.RPC,
		})
		return dbsqlc.Job(r), err
	}
	return row, s.q.JobEventSetActor(ctx, tx, dbsqlc.JobEventSetActorParams{
		ActorKey:  op.Actor.KeyPrefix,
		ActorRole: string(op.Actor.Role),
		ActorRpc:  op.Actor.RPC,
		JobID:     row.ID,
		Seq:       row.LastEventSeq,
	})
}
