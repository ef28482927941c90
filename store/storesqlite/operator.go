package storesqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

var _ store.OperatorStore = (*Store)(nil)

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

// The statuses each operator transition starts from (design §4), as the JSON
// arrays the queries read.
var (
	cancelFrom  = statuses(store.CancelFrom...)
	replayFrom  = statuses(store.ReplayFrom...)
	resolveFrom = statuses(store.ResolveFrom...)
	approveFrom = statuses(store.ApproveFrom...)
)

// operation is one operator transition, run by operate.
type operation struct {
	tenant string
	id     string
	idem   *store.IdempotencyParams
	from   statusSet
	// settled is a status in which the call succeeds without a change (a
	// cancel of a cancelled job); empty for none.
	settled store.JobStatus
	// apply is the conditional UPDATE; sql.ErrNoRows when it matched no row.
	apply func(ctx context.Context, tx *sql.Tx, id string, now int64) (dbsqlite.Job, error)
	// record writes what goes with the transition applied to row: its event
	// and, for a replay, the deleted checkpoints.
	record func(ctx context.Context, tx *sql.Tx, row dbsqlite.Job) error
}

// JobCancel implements store.OperatorStore. A running job only gets
// cancel_requested: that is no status transition, so no event is appended;
// the worker's settle to cancelled appends one.
func (s *Store) JobCancel(ctx context.Context, params *store.JobCancelParams) (*store.OperatorResult, error) {
	return s.operate(ctx, operation{
		tenant:  params.Tenant,
		id:      params.ID,
		idem:    params.Idempotency,
		from:    cancelFrom,
		settled: store.JobStatusCancelled,
		apply: func(ctx context.Context, tx *sql.Tx, id string, now int64) (dbsqlite.Job, error) {
			return s.q.JobCancel(ctx, tx, dbsqlite.JobCancelParams{
				Now:          now,
				Tenant:       params.Tenant,
				ID:           id,
				FromStatuses: cancelFrom.json,
			})
		},
		record: func(ctx context.Context, tx *sql.Tx, row dbsqlite.Job) error {
			if row.Status != string(store.JobStatusCancelled) {
				return nil // cancel_requested on a running job
			}
			return s.jobEventAppend(ctx, tx, row.ID, store.OperatorEventMessage("cancelled", params.Message, nil))
		},
	})
}

// JobReplay implements store.OperatorStore. The attempt is not reset: it is
// the fencing token. With FromStage, a job at that stage or later goes back
// to the stage before it (uploaded for uploaded and text_extracted), and an
// approval no longer stands: the plan is computed again. FromStage published
// is an error: there is nothing to replay from there.
func (s *Store) JobReplay(ctx context.Context, params *store.JobReplayParams) (*store.OperatorResult, error) {
	resetStages, resetStage, err := store.ReplayReset(params.FromStage)
	if err != nil {
		return nil, err
	}
	reset, err := json.Marshal(resetStages)
	if err != nil {
		return nil, fmt.Errorf("storesqlite: replay stages: %w", err)
	}
	action := "replayed"
	if params.FromStage != "" {
		action = "replayed from " + string(params.FromStage)
	}
	return s.operate(ctx, operation{
		tenant: params.Tenant,
		id:     params.ID,
		idem:   params.Idempotency,
		from:   replayFrom,
		apply: func(ctx context.Context, tx *sql.Tx, id string, now int64) (dbsqlite.Job, error) {
			return s.q.JobReplay(ctx, tx, dbsqlite.JobReplayParams{
				ResetStages:   string(reset),
				ResetStage:    resetStage,
				ClearApproval: boolInt(len(resetStages) > 0),
				Now:           now,
				Tenant:        params.Tenant,
				ID:            id,
				FromStatuses:  replayFrom.json,
			})
		},
		record: func(ctx context.Context, tx *sql.Tx, row dbsqlite.Job) error {
			if len(resetStages) > 0 {
				err := s.q.CheckpointDeleteStages(ctx, tx, dbsqlite.CheckpointDeleteStagesParams{JobID: row.ID, Stages: string(reset)})
				if err != nil {
					return interpretError(err)
				}
			}
			return s.jobEventAppend(ctx, tx, row.ID, store.OperatorEventMessage(action, params.Message, nil))
		},
	})
}

// JobResolve implements store.OperatorStore. A To other than queued or
// failed is an error, not ErrTransitionRefused: it is no transition at all.
func (s *Store) JobResolve(ctx context.Context, params *store.JobResolveParams) (*store.OperatorResult, error) {
	settle := settlement{status: params.To, from: resolveFrom}
	switch params.To {
	case store.JobStatusQueued:
		settle.freshBudget = true // the operator decided: a new retry budget
		settle.message = store.OperatorEventMessage("resolved: retry", params.Message, nil)
	case store.JobStatusFailed:
		settle.finished = true
		settle.message = store.OperatorEventMessage("resolved: failed", params.Message, params.Error)
		if params.Error != nil {
			b, err := json.Marshal(params.Error)
			if err != nil {
				return nil, fmt.Errorf("storesqlite: job error: %w", err)
			}
			settle.error = new(string(b))
		}
	default:
		return nil, fmt.Errorf("storesqlite: resolve to %q: want queued or failed", params.To)
	}
	return s.settle(ctx, params.Tenant, params.ID, params.Idempotency, settle)
}

// JobApprove implements store.OperatorStore.
func (s *Store) JobApprove(ctx context.Context, params *store.JobApproveParams) (*store.OperatorResult, error) {
	settle := settlement{from: approveFrom}
	if params.Approve {
		settle.status = store.JobStatusQueued
		settle.approved = true
		settle.message = store.OperatorEventMessage("approved", params.Message, nil)
	} else {
		settle.status = store.JobStatusCancelled
		settle.finished = true
		settle.message = store.OperatorEventMessage("rejected", params.Message, nil)
	}
	return s.settle(ctx, params.Tenant, params.ID, params.Idempotency, settle)
}

// settlement is a JobSettle: a job no worker holds moved to status.
type settlement struct {
	status      store.JobStatus
	from        statusSet
	error       *string // JSON; nil keeps the job's last error
	approved    bool
	finished    bool
	message     string
	freshBudget bool // a retry by hand starts the budget again
}

// settle runs JobSettle as an operation.
func (s *Store) settle(ctx context.Context, tenant, id string, idem *store.IdempotencyParams, settle settlement) (*store.OperatorResult, error) {
	return s.operate(ctx, operation{
		tenant: tenant,
		id:     id,
		idem:   idem,
		from:   settle.from,
		apply: func(ctx context.Context, tx *sql.Tx, id string, now int64) (dbsqlite.Job, error) {
			var finishedAt *int64
			if settle.finished {
				finishedAt = &now
			}
			return s.q.JobSettle(ctx, tx, dbsqlite.JobSettleParams{
				Status:       string(settle.status),
				Error:        settle.error,
				Approved:     boolInt(settle.approved),
				FreshBudget:  boolInt(settle.freshBudget),
				FinishedAt:   finishedAt,
				Now:          now,
				Tenant:       tenant,
				ID:           id,
				FromStatuses: settle.from.json,
			})
		},
		record: func(ctx context.Context, tx *sql.Tx, row dbsqlite.Job) error {
			return s.jobEventAppend(ctx, tx, row.ID, settle.message)
		},
	})
}

// operate runs op in one write transaction: the key, then the transition.
func (s *Store) operate(ctx context.Context, op operation) (*store.OperatorResult, error) {
	id, ok := canonicalUUID(op.id)
	if !ok {
		return nil, store.ErrNotFound // no job has an id that is not a uuid
	}
	var (
		row      dbsqlite.Job
		replayed bool
	)
	err := s.inWriteTx(ctx, func(tx *sql.Tx, now int64) error {
		if op.idem != nil {
			seen, err := s.operatorKeyTake(ctx, tx, op.tenant, id, op.idem, now)
			if err != nil {
				return err
			}
			if seen {
				replayed = true
				row, err = s.q.JobGetByID(ctx, tx, dbsqlite.JobGetByIDParams{Tenant: op.tenant, ID: id})
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
	job, err := jobFromRow(row)
	if err != nil {
		return nil, err
	}
	return &store.OperatorResult{Job: job, Replayed: replayed}, nil
}

// operatorKeyTake inserts the key, or reports that it was taken before by the
// same request. A key bound to another fingerprint or another job is
// ErrIdempotencyKeyReused.
func (s *Store) operatorKeyTake(ctx context.Context, tx *sql.Tx, tenant, id string, idem *store.IdempotencyParams, now int64) (seen bool, err error) {
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
	if key.Fingerprint != idem.Fingerprint || key.JobID != id {
		return false, store.ErrIdempotencyKeyReused
	}
	return true, nil
}

// operateApply runs op's UPDATE and records it. When the UPDATE matches no
// row, the job is read:
// absent is ErrNotFound, in op.settled it is returned as it is, in another
// status ErrTransitionRefused. No other write runs in between, so a job in a
// status op may start from cannot be among them.
func (s *Store) operateApply(ctx context.Context, tx *sql.Tx, op operation, id string, now int64) (dbsqlite.Job, error) {
	row, err := op.apply(ctx, tx, id, now)
	if err == nil {
		return row, op.record(ctx, tx, row)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return dbsqlite.Job{}, interpretError(err)
	}
	current, err := s.q.JobGetByID(ctx, tx, dbsqlite.JobGetByIDParams{Tenant: op.tenant, ID: id})
	if err != nil {
		return dbsqlite.Job{}, interpretError(err) // no row: ErrNotFound
	}
	switch {
	case slices.Contains(op.from.list, current.Status):
		return dbsqlite.Job{}, fmt.Errorf("storesqlite: job %s: operator transition from %s matched no row", id, current.Status)
	case op.settled != "" && current.Status == string(op.settled):
		return current, nil
	default:
		return dbsqlite.Job{}, &store.TransitionRefusedError{Status: store.JobStatus(current.Status)}
	}
}

// statusSet is a set of statuses a transition starts from: the list, and the
// JSON array the queries read (see internal/dbsqlite/operator.sql).
type statusSet struct {
	list []string
	json string
}

func statuses(s ...store.JobStatus) statusSet {
	list := make([]string, len(s))
	for i, status := range s {
		list[i] = string(status)
	}
	b, err := json.Marshal(list)
	if err != nil {
		panic(err) // a []string always marshals
	}
	return statusSet{list: list, json: string(b)}
}
