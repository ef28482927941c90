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

	// A job's write of CheckpointWriteBatch, around its job savepoint.
	sqlSavepointWrite         = "SAVEPOINT batch_write"
	sqlRollbackSavepointWrite = "ROLLBACK TO batch_write"
	sqlReleaseSavepointWrite  = "RELEASE batch_write"
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
// unfenced, then the checkpoints in a savepoint that a lost lease rolls
// back alone, so the journal stays.
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
		var err error
		fenceErr, err = s.checkpointWriteManyTx(ctx, tx, now, id, params)
		return err
	})
	if err != nil {
		return err
	}
	return fenceErr
}

// checkpointWriteManyTx is CheckpointWriteMany's write in tx: err, when
// set, must roll back all of it; fenceErr is the lease's refusal of the
// checkpoints, the journal kept.
func (s *Store) checkpointWriteManyTx(ctx context.Context, tx *writeTx, now int64, id string, params *store.CheckpointWriteManyParams) (fenceErr, err error) {
	if params.Attempt != nil {
		if err := s.llmAttemptRecordTx(ctx, tx, now, id, params.Attempt); err != nil {
			return nil, err
		}
	}
	fenceErr = s.inJobSavepoint(ctx, tx, func() error {
		for _, cp := range params.Checkpoints {
			if err := s.checkpointWriteTx(ctx, tx, now, params.Lease, id, cp); err != nil {
				return err
			}
		}
		if params.Stage == "" || slices.ContainsFunc(params.Checkpoints, func(cp store.StageCheckpoint) bool { return cp.AdvanceStage }) {
			return nil
		}
		_, err := s.q.JobStageSet(ctx, tx, dbsqlite.JobStageSetParams{
			Stage: string(params.Stage), Now: now, ID: id, Owner: new(params.Lease.Owner), Attempt: int64(params.Lease.Attempt),
		})
		return interpretLeaseError(err)
	})
	if fenceErr != nil && !errors.Is(fenceErr, store.ErrLeaseLost) {
		return nil, fenceErr // not the fence: nothing of this write commits
	}
	return fenceErr, nil
}

// CheckpointWriteBatch implements store.CheckpointBatchWriter: one write
// transaction, each job's write in a savepoint of its own (inside it, its
// checkpoints in the job savepoint the fence rolls back), so a write the
// store refuses rolls back alone.
func (s *Store) CheckpointWriteBatch(ctx context.Context, params *store.CheckpointWriteBatchParams) (*store.CheckpointWriteBatchResult, error) {
	res := &store.CheckpointWriteBatchResult{Errs: make([]error, len(params.Writes))}
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		seen := make(map[string]bool, len(params.Writes))
		for i, p := range params.Writes {
			res.Errs[i] = nil
			id, ok := canonicalUUID(p.Lease.JobID)
			switch {
			case !ok && p.Attempt != nil:
				res.Errs[i] = store.ErrNotFound
				continue
			case !ok:
				res.Errs[i] = store.ErrLeaseLost
				continue
			case seen[id]:
				res.Errs[i] = fmt.Errorf("storesqlite: job %s twice in one checkpoint batch: %w", id, store.ErrLeaseLost)
				continue
			}
			seen[id] = true
			if _, err := tx.ExecContext(ctx, sqlSavepointWrite); err != nil {
				return fmt.Errorf("%w: %w", errSavepoint, err)
			}
			fenceErr, err := s.checkpointWriteManyTx(ctx, tx, now, id, p)
			if errors.Is(err, errSavepoint) || errors.Is(err, store.ErrUnavailable) {
				return err
			}
			if err != nil {
				if _, rerr := tx.ExecContext(ctx, sqlRollbackSavepointWrite); rerr != nil {
					return fmt.Errorf("%w: %w", errSavepoint, rerr)
				}
				fenceErr = err
			}
			if _, err := tx.ExecContext(ctx, sqlReleaseSavepointWrite); err != nil {
				return fmt.Errorf("%w: %w", errSavepoint, err)
			}
			res.Errs[i] = fenceErr
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// JobPublishMany implements store.EngineStore: one write transaction, each
// job in a savepoint of its own, so a job refused (its lease lost) rolls
// back alone. Writes take turns, so a later job of a dedup key sees an
// earlier one's success in the same transaction and publishes as
// deduplicated.
func (s *Store) JobPublishMany(ctx context.Context, params *store.JobPublishManyParams) (*store.JobPublishManyResult, error) {
	items := make([]store.JobPublishItem, len(params.Jobs))
	rows := make([]*dbsqlite.Job, len(params.Jobs))
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
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
			publish := func() error {
				row, err := s.publishTx(ctx, tx, now, id, p)
				if err == nil {
					rows[i] = &row
				}
				return err
			}
			err := s.inJobSavepoint(ctx, tx, publish)
			if errors.Is(err, store.ErrDuplicateComputation) {
				err = s.inJobSavepoint(ctx, tx, publish) // publishTx's retry
			}
			if err != nil && !isRefusal(err) {
				return err // the transaction itself failed
			}
			items[i].Err = err
		}
		return nil
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
