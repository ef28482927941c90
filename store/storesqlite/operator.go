package storesqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// Every operator call is one write transaction (BEGIN IMMEDIATE on the single
// writer; see internal/dbsqlite/operator.sql):
//
//  1. With an idempotency key, the key is inserted first, ON CONFLICT DO
//     NOTHING. Writes take turns, so of concurrent callers exactly one
//     inserts; a later one finds the key and returns the job as it is now,
//     Replayed, having applied nothing. No janitor runs in between either, so
//     unlike Postgres's there is no read of a key freed after the insert.
//  2. The transition: one conditional UPDATE on the statuses it may start
//     from, tenant-scoped, with last_event_seq + 1; its event follows in the
//     same transaction.
//  3. Only when the UPDATE matched no row: the job is read to tell
//     ErrNotFound from ErrTransitionRefused. Both roll back, so the key is
//     not consumed and a later call with it may still succeed. (A cancel of
//     a cancelled job is a success: it commits, key included.)

// operation is one operator transition, run by operate.
type operation struct {
	store.OperatorTransition
	store.OperatorTarget
	// message is the event's, for the audit event of a cancel request.
	message string
	// apply is the conditional UPDATE; sql.ErrNoRows when it matched no row.
	apply func(ctx context.Context, tx *writeTx, id string, now int64) (dbsqlite.Job, error)
	// record writes what goes with the transition applied to row: its event
	// and, for a replay, the deleted checkpoints.
	record func(ctx context.Context, tx *writeTx, row dbsqlite.Job) error
}

// JobCancel implements store.OperatorStore. A running job only gets
// cancel_requested: that is no status transition, so no event is appended;
// the worker's settle to cancelled appends one.
func (s *Store) JobCancel(ctx context.Context, params *store.JobCancelParams) (*store.OperatorResult, error) {
	return s.operate(ctx, operation{
		OperatorTransition: store.CancelTransition,
		OperatorTarget:     params.Target(),
		message:            params.EventMessage(),
		apply: func(ctx context.Context, tx *writeTx, id string, now int64) (dbsqlite.Job, error) {
			return s.q.JobCancel(ctx, tx, dbsqlite.JobCancelParams{
				Now:          now,
				Tenant:       params.Tenant,
				ID:           id,
				FromStatuses: jsonList(store.CancelTransition.FromStrings()),
			})
		},
		record: func(ctx context.Context, tx *writeTx, row dbsqlite.Job) error {
			if row.Status != string(store.JobStatusCancelled) {
				return nil // cancel_requested on a running job
			}
			return s.jobEventAppend(ctx, tx, row.ID, params.EventMessage())
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
	reset := jsonList(w.ResetStages)
	return s.operate(ctx, operation{
		OperatorTransition: store.ReplayTransition,
		OperatorTarget:     params.Target(),
		apply: func(ctx context.Context, tx *writeTx, id string, now int64) (dbsqlite.Job, error) {
			return s.q.JobReplay(ctx, tx, dbsqlite.JobReplayParams{
				ResetStages:   reset,
				ResetStage:    w.ResetStage,
				ClearApproval: len(w.ResetStages) > 0,
				Now:           now,
				Tenant:        params.Tenant,
				ID:            id,
				FromStatuses:  jsonList(store.ReplayTransition.FromStrings()),
			})
		},
		record: func(ctx context.Context, tx *writeTx, row dbsqlite.Job) error {
			if len(w.ResetStages) > 0 {
				err := s.q.CheckpointDeleteStages(ctx, tx, dbsqlite.CheckpointDeleteStagesParams{JobID: row.ID, Stages: reset})
				if err != nil {
					return interpretError(err)
				}
			}
			return s.jobEventAppend(ctx, tx, row.ID, w.Message)
		},
	})
}

// settle runs JobSettle as an operation.
func (s *Store) settle(ctx context.Context, target store.OperatorTarget, w *store.JobSettleWrite) (*store.OperatorResult, error) {
	return s.operate(ctx, operation{
		OperatorTransition: w.OperatorTransition,
		OperatorTarget:     target,
		apply: func(ctx context.Context, tx *writeTx, id string, now int64) (dbsqlite.Job, error) {
			var finishedAt *int64
			if w.Finished {
				finishedAt = &now
			}
			return s.q.JobSettle(ctx, tx, dbsqlite.JobSettleParams{
				Status:       string(w.To),
				Error:        rowmap.StringOrNil(w.Error),
				Approved:     w.Approved,
				FreshBudget:  w.FreshBudget,
				FinishedAt:   finishedAt,
				Now:          now,
				Tenant:       target.Tenant,
				ID:           id,
				FromStatuses: jsonList(w.FromStrings()),
			})
		},
		record: func(ctx context.Context, tx *writeTx, row dbsqlite.Job) error {
			return s.jobEventAppend(ctx, tx, row.ID, w.Message)
		},
	})
}

// operate runs op in one write transaction: the key, then the transition.
func (s *Store) operate(ctx context.Context, op operation) (*store.OperatorResult, error) {
	id, ok := canonicalUUID(op.ID)
	if !ok {
		return nil, store.ErrNotFound // no job has an id that is not a uuid
	}
	var (
		row      dbsqlite.Job
		replayed bool
	)
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		if op.Idempotency != nil {
			seen, err := s.operatorKeyTake(ctx, tx, op.Tenant, id, op.Idempotency, now)
			if err != nil {
				return err
			}
			if seen {
				replayed = true
				row, err = s.q.JobGetByID(ctx, tx, dbsqlite.JobGetByIDParams{Tenant: op.Tenant, ID: id})
				return interpretError(err)
			}
		}
		var err error
		row, err = s.operateApply(ctx, tx, op, id, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	job, err := s.job(ctx, row)
	if err != nil {
		return nil, err
	}
	return &store.OperatorResult{Job: job, Replayed: replayed}, nil
}

// operatorKeyTake inserts the key, or reports that it was taken before by the
// same request. A key bound to another fingerprint or another job is
// ErrIdempotencyKeyReused.
func (s *Store) operatorKeyTake(ctx context.Context, tx *writeTx, tenant, id string, idem *store.IdempotencyParams, now int64) (seen bool, err error) {
	inserted, err := s.q.IdempotencyKeyInsert(ctx, tx, dbsqlite.IdempotencyKeyInsertParams{
		Tenant:      tenant,
		Method:      idem.Method,
		IdemKey:     idem.Key,
		Fingerprint: idem.Fingerprint,
		JobID:       id,
		CreatedAt:   now,
	})
	if err != nil {
		return false, interpretError(err)
	}
	if inserted == 1 {
		return false, nil
	}
	key, err := s.q.IdempotencyKeyGet(ctx, tx, dbsqlite.IdempotencyKeyGetParams{
		Tenant:  tenant,
		Method:  idem.Method,
		IdemKey: idem.Key,
	})
	if err != nil {
		return false, interpretError(err)
	}
	return true, idem.CheckKey(key.Fingerprint, key.JobID, id)
}

// operateApply runs op's UPDATE and records it. When the UPDATE matches no
// row, the job is read and op's Refuse decides: absent is ErrNotFound, a
// settled job is returned as it is, any other status is refused. No other
// write runs in between, so a job in a status op may start from cannot be
// among them.
func (s *Store) operateApply(ctx context.Context, tx *writeTx, op operation, id string, now int64) (dbsqlite.Job, error) {
	row, err := op.apply(ctx, tx, id, now)
	if err == nil {
		if err := op.record(ctx, tx, row); err != nil {
			return dbsqlite.Job{}, err
		}
		if op.Actor == nil {
			return row, nil
		}
		return s.audit(ctx, tx, op, row, now)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return dbsqlite.Job{}, interpretError(err)
	}
	current, err := s.q.JobGetByID(ctx, tx, dbsqlite.JobGetByIDParams{Tenant: op.Tenant, ID: id})
	if err != nil {
		return dbsqlite.Job{}, interpretError(err) // no row: ErrNotFound
	}
	switch refusal, err := op.Refuse(store.JobStatus(current.Status)); refusal {
	case store.RefusalRaced:
		return dbsqlite.Job{}, fmt.Errorf("storesqlite: job %s: operator transition from %s matched no row", id, current.Status)
	case store.RefusalSettled:
		return current, nil
	default:
		return dbsqlite.Job{}, err
	}
}

// audit records op's actor, in op's transaction: on the event the
// transition appended, or, when it appended none (a cancel asked of a
// running job), on an event of its own.
func (s *Store) audit(ctx context.Context, tx *writeTx, op operation, row dbsqlite.Job, now int64) (dbsqlite.Job, error) {
	if row.Status == string(store.JobStatusRunning) {
		seq, err := s.q.JobEventSeqBump(ctx, tx, dbsqlite.JobEventSeqBumpParams{Now: now, JobID: row.ID})
		if err != nil {
			return dbsqlite.Job{}, interpretError(err)
		}
		row.LastEventSeq, row.UpdatedAt = seq, now
		if err := s.jobEventAppend(ctx, tx, row.ID, op.message); err != nil {
			return dbsqlite.Job{}, err
		}
	}
	return row, s.jobEventSetActor(ctx, tx, row, op.Actor)
}

// jobEventSetActor names actor, if any, on the event row's job has just
// appended.
func (s *Store) jobEventSetActor(ctx context.Context, tx *writeTx, row dbsqlite.Job, actor *store.Actor) error {
	if actor == nil {
		return nil
	}
	return interpretError(s.q.JobEventSetActor(ctx, tx, dbsqlite.JobEventSetActorParams{
		ActorKey:  actor.KeyPrefix,
		ActorRole: string(actor.Role),
		ActorRpc:  actor.RPC,
		JobID:     row.ID,
		Seq:       row.LastEventSeq,
	}))
}

// jsonList is a list as the JSON array the queries read with json_each (see
// internal/dbsqlite/operator.sql).
// jsonOf is v as JSON text, for a statement that reads it with json_each.
func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // ids, strings and numbers always marshal
	}
	return string(b)
}

func jsonList(list []string) string {
	b, err := json.Marshal(list)
	if err != nil {
		panic(err) // a []string always marshals
	}
	return string(b)
}
