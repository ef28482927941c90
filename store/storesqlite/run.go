package storesqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// Run-wide operator calls are one write transaction of the single writer:
// the key, then each job's transition with the same statements the
// per-job operator calls use (in SQLite a statement per job costs no
// round trip), then the result with the key.

// RunCreate implements store.RunStore.
func (s *Store) RunCreate(ctx context.Context, params *store.RunCreateParams) (*store.RunCreateResult, error) {
	id, ok := canonicalUUID(params.ID)
	if !ok {
		return nil, fmt.Errorf("storesqlite: run id %q: %w", params.ID, store.ErrInvalidRow)
	}
	labels, err := json.Marshal(rowmap.NonNilMap(params.Labels))
	if err != nil {
		return nil, fmt.Errorf("storesqlite: labels: %w", err)
	}
	var (
		row      dbsqlite.Run
		inserted int64
	)
	err = s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		var err error
		inserted, err = s.q.RunInsert(ctx, tx, dbsqlite.RunInsertParams{
			ID: id, Tenant: params.Tenant, IdemKey: params.IdempotencyKey, Fingerprint: params.Fingerprint,
			Name: params.Name, Pipeline: params.Pipeline, ModelProfile: params.ModelProfile,
			Params: rowmap.JSONObject(params.Params), Labels: string(labels), ProviderBatch: params.ProviderBatch, CreatedAt: now,
		})
		if err != nil {
			return interpretError(err)
		}
		row, err = s.q.RunGetByKey(ctx, tx, dbsqlite.RunGetByKeyParams{Tenant: params.Tenant, IdemKey: params.IdempotencyKey})
		return interpretError(err)
	})
	if err != nil {
		return nil, err
	}
	run, err := s.runWithProgress(ctx, row, params.RecentSince)
	if err != nil {
		return nil, err
	}
	if inserted == 0 {
		return store.RunCreateExisting(params.Fingerprint, run)
	}
	return &store.RunCreateResult{Run: run}, nil
}

// RunList implements store.RunStore.
func (s *Store) RunList(ctx context.Context, params *store.RunListParams) (*store.RunListResult, error) {
	limit := params.RunListLimit()
	args := dbsqlite.RunListParams{Tenant: params.Tenant, Max: int64(limit) + 1}
	var err error
	if args.AfterCreatedAt, args.AfterID, err = cursorAfter(params.After); err != nil {
		return nil, err
	}
	rows, err := s.q.RunList(ctx, s.read, args)
	return rowmap.Page(rows, err, interpretError, func(row dbsqlite.Run) (*store.Run, error) {
		return s.runWithProgress(ctx, row, params.RecentSince)
	}, limit, store.RunListPage)
}

// RunItemGetMany implements store.RunStore: one indexed read per key, on
// the read pool.
func (s *Store) RunItemGetMany(ctx context.Context, params *store.RunItemGetManyParams) ([]*store.RunItem, error) {
	id, ok := canonicalUUID(params.RunID)
	if !ok {
		return nil, nil
	}
	var items []*store.RunItem
	for _, key := range params.Keys {
		row, err := s.q.RunItemGet(ctx, s.read, dbsqlite.RunItemGetParams{RunID: id, Tenant: params.Tenant, ItemKey: key})
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, interpretError(err)
		}
		job, err := jobFromRow(row.Job)
		if err != nil {
			return nil, err
		}
		job.Params, job.Labels = nil, nil // see store.RunItem
		items = append(items, &store.RunItem{RunID: id, Key: row.ItemKey, Fingerprint: row.Fingerprint, Outcome: store.RunItemOutcome(row.Outcome), Job: job})
	}
	return items, nil
}

// RunRetryFailures implements store.RunStore.
func (s *Store) RunRetryFailures(ctx context.Context, params *store.RunRetryFailuresParams) (*store.RunOperationResult, error) {
	id, ok := canonicalUUID(params.RunID)
	if !ok {
		return nil, store.ErrNotFound
	}
	idem := params.Idempotency
	var res *store.RunOperationResult
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		if _, err := s.q.RunGetByID(ctx, tx, dbsqlite.RunGetByIDParams{Tenant: params.Tenant, ID: id}); err != nil {
			return interpretError(err)
		}
		inserted, err := s.q.RunOperationInsert(ctx, tx, dbsqlite.RunOperationInsertParams{
			Tenant: params.Tenant, Method: idem.Method, IdemKey: idem.Key, Fingerprint: idem.Fingerprint, RunID: id, CreatedAt: now,
		})
		if err != nil {
			return interpretError(err)
		}
		if inserted == 0 {
			op, err := s.q.RunOperationGet(ctx, tx, dbsqlite.RunOperationGetParams{Tenant: params.Tenant, Method: idem.Method, IdemKey: idem.Key})
			if err != nil {
				return interpretError(err)
			}
			res, err = store.RunOperationExisting(idem, op.Fingerprint, op.RunID, id, int(op.Result))
			return err
		}
		ids, err := s.runJobIDs(ctx, tx, params.Tenant, id, store.ReplayTransition.FromStrings(), false)
		if err != nil {
			return err
		}
		for _, jobID := range ids {
			row, err := s.q.JobReplay(ctx, tx, dbsqlite.JobReplayParams{
				ResetStages: "[]", Now: now, Tenant: params.Tenant, ID: jobID,
				FromStatuses: jsonList(store.ReplayTransition.FromStrings()),
			})
			if err != nil {
				return interpretError(err)
			}
			if err := s.jobEventAppend(ctx, tx, row.ID, params.Message); err != nil {
				return err
			}
			if err := s.jobEventSetActor(ctx, tx, row, params.Actor); err != nil {
				return err
			}
		}
		res = &store.RunOperationResult{Count: len(ids)}
		return interpretError(s.q.RunOperationSetResult(ctx, tx, dbsqlite.RunOperationSetResultParams{
			Result: int64(len(ids)), Tenant: params.Tenant, Method: idem.Method, IdemKey: idem.Key,
		}))
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// RunCancel implements store.RunStore.
func (s *Store) RunCancel(ctx context.Context, params *store.RunCancelParams) (*store.RunOperationResult, error) {
	id, ok := canonicalUUID(params.RunID)
	if !ok {
		return nil, store.ErrNotFound
	}
	var n int
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		marked, err := s.q.RunCancelMark(ctx, tx, dbsqlite.RunCancelMarkParams{Now: &now, Tenant: params.Tenant, ID: id})
		if err := rowmap.Affected(marked, err, interpretError); err != nil {
			return err
		}
		ids, err := s.runJobIDs(ctx, tx, params.Tenant, id, store.CancelTransition.FromStrings(), true)
		if err != nil {
			return err
		}
		for _, jobID := range ids {
			row, err := s.q.JobCancel(ctx, tx, dbsqlite.JobCancelParams{
				Now: now, Tenant: params.Tenant, ID: jobID, FromStatuses: jsonList(store.CancelTransition.FromStrings()),
			})
			if err != nil {
				return interpretError(err)
			}
			if row.Status == string(store.JobStatusCancelled) {
				if err := s.jobEventAppend(ctx, tx, row.ID, params.Message); err != nil {
					return err
				}
				if err := s.jobEventSetActor(ctx, tx, row, params.Actor); err != nil {
					return err
				}
			}
			n++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &store.RunOperationResult{Count: n}, nil
}

// runJobIDs lists the run's jobs in statuses (those it created alone when
// createdOnly), leaving out running jobs already asked to stop.
func (s *Store) runJobIDs(ctx context.Context, tx *writeTx, tenant, runID string, statuses []string, createdOnly bool) ([]string, error) {
	ids, err := s.q.RunJobIDs(ctx, tx, dbsqlite.RunJobIDsParams{
		RunID: runID, Tenant: tenant, Statuses: jsonList(statuses), CreatedOnly: createdOnly,
	})
	return ids, interpretError(err)
}

// runItemRecord records a submission's item in its run, in the write that
// answered it.
func (s *Store) runItemRecord(ctx context.Context, tx *writeTx, p *store.JobSubmitParams, res *store.JobSubmitResult, now int64) error {
	if p.RunID == "" {
		return nil
	}
	runID, ok := canonicalUUID(p.RunID)
	if !ok {
		return fmt.Errorf("storesqlite: run id %q: %w", p.RunID, store.ErrInvalidRow)
	}
	return interpretError(s.q.RunItemInsert(ctx, tx, dbsqlite.RunItemInsertParams{
		RunID: runID, ItemKey: p.IdempotencyKey, Tenant: p.Tenant, Fingerprint: p.Fingerprint,
		JobID: res.Job.ID, Outcome: string(store.RunItemOutcomeOf(res.Outcome)), CreatedAt: now,
	}))
}

// runWithProgress is the run of row with its progress.
func (s *Store) runWithProgress(ctx context.Context, row dbsqlite.Run, recentSince time.Time) (*store.Run, error) {
	run, err := s.runFromRow(row)
	if err != nil {
		return nil, err
	}
	since := recentSince.UnixMicro()
	rows, err := s.q.RunProgress(ctx, s.read, dbsqlite.RunProgressParams{RecentSince: &since, RunID: row.ID})
	groups, err := rowmap.Map(rows, err, interpretError, func(r dbsqlite.RunProgressRow) store.RunProgressRow {
		return columns.RunProgress(rowmap.RunProgressRow(r))
	})
	if err != nil {
		return nil, err
	}
	run.Progress = store.RunProgressOf(groups)
	return run, nil
}

// runFromRow is the run of a runs row, without its progress.
func runFromRow(r dbsqlite.Run) (*store.Run, error) {
	return columns.Run(rowmap.RunRow[int64](r))
}
