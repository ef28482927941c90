package storepg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/internal/rundefaults"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// JobGetByID implements store.Store.
func (s *Store) JobGetByID(ctx context.Context, params *store.JobGetByIDParams) (*store.Job, error) {
	id, err := parseUUID(params.ID)
	if err != nil {
		return nil, store.ErrNotFound // no job has an id that is not a uuid
	}
	row, err := s.q.JobGetByID(ctx, s.pool, dbsqlc.JobGetByIDParams{Tenant: params.Tenant, ID: id})
	return rowmap.OneErr(row, err, interpretError, func(row dbsqlc.Job) (*store.Job, error) {
		return s.job(ctx, row)
	})
}

// JobList implements store.Store. It fetches one row more than the page
// (by count or by bytes) to know whether a next page exists.
func (s *Store) JobList(ctx context.Context, params *store.JobListParams) (*store.JobListResult, error) {
	limit := params.PageLimit()
	args := dbsqlc.JobListParams{Tenant: params.Tenant, Max: int64(limit + 1)}
	if params.Status != "" {
		status := string(params.Status)
		args.Status = &status
	}
	if params.Pipeline != "" {
		args.Pipeline = &params.Pipeline
	}
	if params.RunID != "" {
		id, err := parseUUID(params.RunID)
		if err != nil {
			return &store.JobListResult{}, nil // no run has an id that is not a uuid
		}
		args.RunID = &id
	}
	var err error
	if args.AfterCreatedAt, args.AfterID, err = cursorAfter(params.After); err != nil {
		return nil, err
	}
	args.MaxBytes = params.PageBytes()
	rows, err := s.q.JobList(ctx, s.pool, args)
	jobs, err := rowmap.MapErr(rows, err, interpretError, func(r dbsqlc.JobListRow) (store.SizedJob, error) {
		j, err := jobFromRow(r.Job)
		return store.SizedJob{Job: j, Bytes: r.Bytes}, err
	})
	if err != nil {
		return nil, err
	}
	return rundefaults.ListPage(ctx, s.runs, jobs, limit, params.PageBytes())
}

// parseUUID is s in a uuid's canonical text, which a row's uuid column
// reads as, or an error for a string that is no uuid.
func parseUUID(s string) (string, error) {
	var id pgtype.UUID
	if err := id.Scan(s); err != nil {
		return "", err
	}
	return id.String(), nil
}

// cursorAfter is where a page of a list newest first starts: after the
// cursor's created_at and id. Without a cursor (the first page) the
// created_at is NULL and the page starts at the newest row.
func cursorAfter(after *store.JobCursor) (*time.Time, *string, error) {
	if after == nil {
		return nil, nil, nil
	}
	id, err := parseUUID(after.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("storepg: cursor id: %w: %w", store.ErrInvalidRow, err)
	}
	return &after.CreatedAt, &id, nil
}
