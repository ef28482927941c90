package storesqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// The batched engine (docs/architecture.md, "The batched engine"). SQLite
// has no round trips to save, but a write transaction is an fsync: each
// method below is one write transaction on the single writer (which also
// joins it to whatever else is queued), and the reads run on the read pool.

// Savepoint of one job inside a batch's write, so a job refused rolls back
// alone (the writer's own savepoint, write_op, holds the whole batch).
const (
	sqlSavepointJob         = "SAVEPOINT batch_job"
	sqlRollbackSavepointJob = "ROLLBACK TO batch_job"
	sqlReleaseSavepointJob  = "RELEASE batch_job"
)

// JobClaimWork implements store.EngineStore.
func (s *Store) JobClaimWork(ctx context.Context, params *store.JobClaimParams) ([]*store.JobWork, error) {
	jobs, err := s.JobClaim(ctx, params)
	if err != nil {
		return nil, err
	}
	work := make([]*store.JobWork, len(jobs))
	for i, j := range jobs {
		work[i] = &store.JobWork{Job: j, CheckpointsRead: j.Attempt <= 1}
		// A read that fails leaves it to the job's first stage.
		work[i].Document, _ = s.DocumentGet(ctx, &store.DocumentGetParams{Tenant: j.Tenant, SHA256: j.DocumentSHA256})
		if j.Attempt > 1 {
			if cps, err := s.CheckpointList(ctx, &store.CheckpointListParams{JobID: j.ID}); err == nil {
				work[i].Checkpoints, work[i].CheckpointsRead = cps, true
			}
		}
	}
	return work, nil
}

// CheckpointGetByStageKeys implements store.EngineStore: one read of the
// decision cache, the keys a JSON array, and one of the computed success.
// SQLite has no round trips to save by joining them.
func (s *Store) CheckpointGetByStageKeys(ctx context.Context, params *store.CheckpointGetByStageKeysParams) (*store.CheckpointGetByStageKeysResult, error) {
	res := &store.CheckpointGetByStageKeysResult{Checkpoints: make(map[string]*store.Checkpoint, len(params.StageKeys))}
	if params.DedupKey != "" {
		job, err := s.JobComputedSuccessGet(ctx, &store.JobComputedSuccessGetParams{Tenant: params.Tenant, DedupKey: params.DedupKey})
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			res.ComputedBy = job.ID
		}
	}
	if len(params.StageKeys) == 0 {
		return res, nil
	}
	keys, err := json.Marshal(params.StageKeys)
	if err != nil {
		return nil, fmt.Errorf("storesqlite: stage keys: %w", err)
	}
	rows, err := s.q.CheckpointGetByStageKeys(ctx, s.read, dbsqlite.CheckpointGetByStageKeysParams{
		Tenant: params.Tenant, StageKeys: string(keys),
	})
	if err != nil {
		return nil, interpretError(err)
	}
	for _, row := range rows { // newest first: the first of a key wins
		if _, ok := res.Checkpoints[row.StageKey]; !ok {
			res.Checkpoints[row.StageKey] = checkpointFromRow(row)
		}
	}
	return res, nil
}

// JobHeartbeatMany implements store.EngineStore.
func (s *Store) JobHeartbeatMany(ctx context.Context, params *store.JobHeartbeatManyParams) (*store.JobHeartbeatManyResult, error) {
	var res *store.JobHeartbeatManyResult
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		res = &store.JobHeartbeatManyResult{}
		for _, l := range params.Leases {
			id, ok := canonicalUUID(l.JobID)
			if !ok {
				res.Lost = append(res.Lost, l)
				continue
			}
			cancelRequested, err := s.q.JobHeartbeat(ctx, tx, dbsqlite.JobHeartbeatParams{
				LeaseUntil: new(nowOr(params.Now, now) + params.LeaseDuration.Microseconds()),
				ID:         id,
				Owner:      new(l.Owner),
				Attempt:    int64(l.Attempt),
			})
			switch err := interpretLeaseError(err); {
			case errors.Is(err, store.ErrLeaseLost):
				res.Lost = append(res.Lost, l)
			case err != nil:
				return err
			case cancelRequested:
				res.CancelRequested = append(res.CancelRequested, l.JobID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// CheckpointWriteMany implements store.EngineStore: the attempt first,
// unfenced, then the checkpoints, so that a lost lease refuses the
// checkpoints alone and the journal stays. The lease can only be found lost
// by the first fence, before any checkpoint is written (see publishTx), so
// the checkpoints need no savepoint of their own; a refusal that came after
// a write all the same would undo the whole write and run it again with
// the checkpoints in a savepoint.
func (s *Store) CheckpointWriteMany(ctx context.Context, params *store.CheckpointWriteManyParams) error {
	id, ok := canonicalUUID(params.Lease.JobID)
	if !ok {
		if params.Attempt != nil {
			return store.ErrNotFound
		}
		return store.ErrLeaseLost
	}
	var fenceErr error
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		write := func(savepoint bool) (clean bool, err error) {
			fenceErr = nil
			if params.Attempt != nil {
				if err := s.llmAttemptRecordTx(ctx, tx, now, id, params.Attempt); err != nil {
					return false, err
				}
			}
			checkpoints := func() error {
				clean, err = s.checkpointsTx(ctx, tx, now, id, params)
				return err
			}
			if savepoint {
				err = s.inJobSavepoint(ctx, tx, checkpoints)
				clean = true // rolled back to its savepoint
			} else {
				err = checkpoints()
			}
			if err != nil && !errors.Is(err, store.ErrLeaseLost) {
				return false, err // not the fence: nothing of this write commits
			}
			fenceErr = err
			return err == nil || clean, nil
		}
		clean, err := write(false)
		if err != nil || clean {
			return err
		}
		if err := tx.rollbackWrite(ctx); err != nil {
			return err
		}
		_, err = write(true)
		return err
	})
	if err != nil {
		return err
	}
	return fenceErr
}

// checkpointsTx writes the checkpoints of a CheckpointWriteMany and moves
// the job's stage, fenced; clean as publishTx's.
func (s *Store) checkpointsTx(ctx context.Context, tx *writeTx, now int64, id string, params *store.CheckpointWriteManyParams) (clean bool, err error) {
	for i, cp := range params.Checkpoints {
		if err := s.checkpointWriteTx(ctx, tx, now, params.Lease, id, cp); err != nil {
			return i == 0 && errors.Is(err, store.ErrLeaseLost), err
		}
	}
	if params.Stage == "" || slices.ContainsFunc(params.Checkpoints, func(cp store.StageCheckpoint) bool { return cp.AdvanceStage }) {
		return true, nil
	}
	_, err = s.q.JobStageSet(ctx, tx, dbsqlite.JobStageSetParams{
		Stage: string(params.Stage), Now: now, ID: id, Owner: new(params.Lease.Owner), Attempt: int64(params.Lease.Attempt),
	})
	err = interpretLeaseError(err)
	return len(params.Checkpoints) == 0 && errors.Is(err, store.ErrLeaseLost), err
}

// JobPublishMany implements store.EngineStore: one write transaction, in
// which a job refused (its lease lost) rolls back alone. Writes take turns,
// so a later job of a dedup key sees an earlier one's success in the same
// transaction and publishes as deduplicated. A job is refused by its first
// write, before it wrote anything (see publishTx), so the jobs run without
// savepoints of their own; should one fail after a write, the whole write
// is undone and runs again with each job in a savepoint, which its failure
// rolls back alone.
func (s *Store) JobPublishMany(ctx context.Context, params *store.JobPublishManyParams) (*store.JobPublishManyResult, error) {
	items := make([]store.JobPublishItem, len(params.Jobs))
	rows := make([]*dbsqlite.Job, len(params.Jobs))
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		err := s.publishBatchTx(ctx, tx, now, params, items, rows, false)
		if errors.Is(err, errJobSavepoints) {
			if err := tx.rollbackWrite(ctx); err != nil {
				return err
			}
			err = s.publishBatchTx(ctx, tx, now, params, items, rows, true)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	for i, row := range rows {
		if row == nil {
			continue
		}
		if items[i].Job, err = s.job(ctx, *row); err != nil {
			items[i].Job, items[i].Err = nil, err
		}
	}
	return &store.JobPublishManyResult{Items: items}, nil
}

// errJobSavepoints: a job of a batch failed after it wrote, and the batch
// runs again with a savepoint per job.
var errJobSavepoints = errors.New("storesqlite: a job failed after a write")

// publishBatchTx runs JobPublishMany's jobs in tx, each in a savepoint of
// its own when savepoints is set, and keeps each job's answer in items and
// rows.
func (s *Store) publishBatchTx(ctx context.Context, tx *writeTx, now int64, params *store.JobPublishManyParams, items []store.JobPublishItem, rows []*dbsqlite.Job, savepoints bool) error {
	seen := make(map[string]bool, len(params.Jobs))
	for i, p := range params.Jobs {
		rows[i], items[i] = nil, store.JobPublishItem{}
		id, ok := canonicalUUID(p.Lease.JobID)
		switch {
		case !ok:
			items[i].Err = store.ErrLeaseLost
			continue
		case seen[id]:
			items[i].Err = fmt.Errorf("storesqlite: job %s twice in one publish batch: %w", id, store.ErrLeaseLost)
			continue
		}
		seen[id] = true
		var (
			row   dbsqlite.Job
			clean bool
		)
		publish := func() (err error) {
			row, clean, err = s.publishTx(ctx, tx, now, id, p)
			return err
		}
		var err error
		if savepoints {
			err = s.inJobSavepoint(ctx, tx, publish)
		} else {
			err = publish()
		}
		switch {
		case err == nil:
			rows[i] = &row
			continue
		case !isRefusal(err):
			return err // the transaction itself failed
		case !savepoints && !clean:
			return errJobSavepoints
		}
		items[i].Err = err
	}
	return nil
}

// isRefusal: an error of one job's write that leaves the transaction
// usable (its savepoint rolled back), not one of the store.
func isRefusal(err error) bool {
	return !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, errSavepoint)
}

var errSavepoint = errors.New("storesqlite: job savepoint")

// inJobSavepoint runs fn in a savepoint of tx that an error of fn rolls
// back, and returns fn's error.
func (s *Store) inJobSavepoint(ctx context.Context, tx *writeTx, fn func() error) error {
	if _, err := tx.ExecContext(ctx, sqlSavepointJob); err != nil {
		return fmt.Errorf("%w: %w", errSavepoint, err)
	}
	ferr := fn()
	if ferr != nil {
		if _, err := tx.ExecContext(ctx, sqlRollbackSavepointJob); err != nil {
			return fmt.Errorf("%w: %w", errSavepoint, err)
		}
	}
	if _, err := tx.ExecContext(ctx, sqlReleaseSavepointJob); err != nil {
		return fmt.Errorf("%w: %w", errSavepoint, err)
	}
	return ferr
}
