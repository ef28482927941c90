package storepg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// RunCreate implements store.RunStore: an insert that does nothing on a
// taken key, then a read of the key on a fresh snapshot.
func (s *Store) RunCreate(ctx context.Context, params *store.RunCreateParams) (*store.RunCreateResult, error) {
	id, err := parseUUID(params.ID)
	if err != nil {
		return nil, fmt.Errorf("storepg: run id %q: %w", params.ID, store.ErrInvalidRow)
	}
	labels, err := json.Marshal(rowmap.NonNilMap(params.Labels))
	if err != nil {
		return nil, fmt.Errorf("storepg: labels: %w", err)
	}
	row, err := s.q.RunInsert(ctx, s.pool, dbsqlc.RunInsertParams{
		ID: id, Tenant: params.Tenant, IdemKey: params.IdempotencyKey, Fingerprint: params.Fingerprint,
		Name: params.Name, Pipeline: params.Pipeline, ModelProfile: params.ModelProfile,
		Params: rowmap.JSONObject(params.Params), Labels: string(labels), ProviderBatch: params.ProviderBatch,
	})
	existing := errors.Is(err, pgx.ErrNoRows)
	if existing {
		row, err = s.q.RunGetByKey(ctx, s.pool, dbsqlc.RunGetByKeyParams{Tenant: params.Tenant, IdemKey: params.IdempotencyKey})
	}
	if err != nil {
		return nil, interpretError(err)
	}
	run, err := s.runWithProgress(ctx, row, params.RecentSince)
	if err != nil {
		return nil, err
	}
	if existing {
		return store.RunCreateExisting(params.Fingerprint, run)
	}
	return &store.RunCreateResult{Run: run}, nil
}

// RunList implements store.RunStore.
func (s *Store) RunList(ctx context.Context, params *store.RunListParams) (*store.RunListResult, error) {
	limit := params.RunListLimit()
	args := dbsqlc.RunListParams{Tenant: params.Tenant, Max: int64(limit + 1)}
	var err error
	if args.AfterCreatedAt, args.AfterID, err = cursorAfter(params.After); err != nil {
		return nil, err
	}
	rows, err := s.q.RunList(ctx, s.pool, args)
	return rowmap.Page(rows, err, interpretError, func(row dbsqlc.Run) (*store.Run, error) {
		return s.runWithProgress(ctx, row, params.RecentSince)
	}, limit, store.RunListPage)
}

// RunItemGetMany implements store.RunStore.
func (s *Store) RunItemGetMany(ctx context.Context, params *store.RunItemGetManyParams) ([]*store.RunItem, error) {
	id, err := parseUUID(params.RunID)
	if err != nil || len(params.Keys) == 0 {
		return nil, nil
	}
	rows, err := s.q.RunItemGetMany(ctx, s.pool, dbsqlc.RunItemGetManyParams{RunID: id, Tenant: params.Tenant, Keys: params.Keys})
	if err != nil {
		return nil, interpretError(err)
	}
	items := make([]*store.RunItem, len(rows))
	for i, row := range rows {
		job, err := jobFromRow(row.Job)
		if err != nil {
			return nil, err
		}
		job.Params, job.Labels = nil, nil // see store.RunItem
		items[i] = &store.RunItem{RunID: params.RunID, Key: row.ItemKey, Fingerprint: row.Fingerprint, Outcome: store.RunItemOutcome(row.Outcome), Job: job}
	}
	return items, nil
}

// RunRetryFailures implements store.RunStore: one transaction takes the key
// (waiting for a concurrent holder of it, as the operator calls do), then
// replays in one statement and records the count with the key.
func (s *Store) RunRetryFailures(ctx context.Context, params *store.RunRetryFailuresParams) (*store.RunOperationResult, error) {
	id, err := parseUUID(params.RunID)
	if err != nil {
		return nil, store.ErrNotFound
	}
	var (
		res      *store.RunOperationResult
		replayed []dbsqlc.RunReplayFailuresRow
	)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := s.q.RunGetByID(ctx, tx, dbsqlc.RunGetByIDParams{Tenant: params.Tenant, ID: id}); err != nil {
			return err
		}
		idem := params.Idempotency
		_, err := s.q.RunOperationInsert(ctx, tx, dbsqlc.RunOperationInsertParams{
			Tenant: params.Tenant, Method: idem.Method, IdemKey: idem.Key, Fingerprint: idem.Fingerprint, RunID: id,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			op, err := s.q.RunOperationGet(ctx, tx, dbsqlc.RunOperationGetParams{Tenant: params.Tenant, Method: idem.Method, IdemKey: idem.Key})
			if err != nil {
				return err
			}
			res, err = store.RunOperationExisting(idem, op.Fingerprint, op.RunID, id, int(op.Result))
			return err
		}
		if err != nil {
			return err
		}
		replayed, err = s.q.RunReplayFailures(ctx, tx, dbsqlc.RunReplayFailuresParams{
			RunID: id, Tenant: params.Tenant, FromStatuses: store.ReplayTransition.FromStrings(), Message: params.Message,
			ActorKey: params.Actor.KeyPrefixOrEmpty(), ActorRole: params.Actor.RoleOrEmpty(), ActorRpc: params.Actor.RPCOrEmpty(),
		})
		if err != nil {
			return err
		}
		res = &store.RunOperationResult{Count: len(replayed)}
		return s.q.RunOperationSetResult(ctx, tx, dbsqlc.RunOperationSetResultParams{
			Result: int64(len(replayed)), Tenant: params.Tenant, Method: idem.Method, IdemKey: idem.Key,
		})
	})
	if err != nil {
		if errors.Is(err, store.ErrIdempotencyKeyReused) {
			return nil, err
		}
		return nil, interpretError(err)
	}
	for _, r := range replayed {
		s.eventCommitted(r.Tenant, r.ID, r.LastEventSeq)
	}
	return res, nil
}

// RunCancel implements store.RunStore.
func (s *Store) RunCancel(ctx context.Context, params *store.RunCancelParams) (*store.RunOperationResult, error) {
	id, err := parseUUID(params.RunID)
	if err != nil {
		return nil, store.ErrNotFound
	}
	var cancelled []dbsqlc.RunCancelJobsRow
	// RunCancelJobs locks the run's jobs in the order of its join, which a
	// worker's checkpoint batch (job rows locked across its statements)
	// can cross: Postgres then aborts one of the two, and this one, which
	// wrote nothing, runs again.
	err = againIfAborted(func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := s.q.RunCancelMark(ctx, tx, dbsqlc.RunCancelMarkParams{Tenant: params.Tenant, ID: id}); err != nil {
				return err
			}
			var err error
			cancelled, err = s.q.RunCancelJobs(ctx, tx, dbsqlc.RunCancelJobsParams{
				RunID: id, Tenant: params.Tenant, FromStatuses: store.CancelTransition.FromStrings(), Message: params.Message,
				ActorKey: params.Actor.KeyPrefixOrEmpty(), ActorRole: params.Actor.RoleOrEmpty(), ActorRpc: params.Actor.RPCOrEmpty(),
			})
			return err
		})
	})
	if err != nil {
		return nil, interpretError(err)
	}
	for _, r := range cancelled {
		if r.Status == string(store.JobStatusCancelled) {
			s.eventCommitted(r.Tenant, r.ID, r.LastEventSeq)
		}
	}
	return &store.RunOperationResult{Count: len(cancelled)}, nil
}

// runItemsOfExisting records the items whose keys existed (answered from
// a read after the submit statement) in their runs.
func (s *Store) runItemsOfExisting(ctx context.Context, jobs []*store.JobSubmitParams, idx []int, items []store.JobSubmitItem) error {
	var a dbsqlc.RunItemInsertManyParams
	for _, i := range idx {
		p := jobs[i]
		if p.RunID == "" || items[i].Err != nil || items[i].Job == nil {
			continue
		}
		runID, err := parseUUID(p.RunID)
		if err != nil {
			return fmt.Errorf("storepg: run id %q: %w", p.RunID, store.ErrInvalidRow)
		}
		jobID, err := parseUUID(items[i].Job.ID)
		if err != nil {
			return err
		}
		a.RunID = append(a.RunID, runID)
		a.ItemKey = append(a.ItemKey, p.IdempotencyKey)
		a.Tenant = append(a.Tenant, p.Tenant)
		a.Fingerprint = append(a.Fingerprint, p.Fingerprint)
		a.JobID = append(a.JobID, jobID)
		a.Outcome = append(a.Outcome, string(store.RunItemOutcomeOf(items[i].Outcome)))
	}
	if len(a.RunID) == 0 {
		return nil
	}
	return interpretError(s.q.RunItemInsertMany(ctx, s.pool, a))
}

// runWithProgress is the run of row with its progress.
func (s *Store) runWithProgress(ctx context.Context, row dbsqlc.Run, recentSince time.Time) (*store.Run, error) {
	run, err := s.runFromRow(row)
	if err != nil {
		return nil, err
	}
	rows, err := s.q.RunProgress(ctx, s.pool, dbsqlc.RunProgressParams{RecentSince: recentSince, RunID: row.ID})
	groups, err := rowmap.Map(rows, err, interpretError, func(r dbsqlc.RunProgressRow) store.RunProgressRow {
		return columns.RunProgress(rowmap.RunProgressRow(r))
	})
	if err != nil {
		return nil, err
	}
	run.Progress = store.RunProgressOf(groups)
	return run, nil
}

// runFromRow is the run of a runs row, without its progress.
func runFromRow(r dbsqlc.Run) (*store.Run, error) {
	return columns.Run(rowmap.RunRow[time.Time](r))
}
