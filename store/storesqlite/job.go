package storesqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/google/uuid"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/internal/rundefaults"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// jobSubmit is JobSubmit's insert-or-return of one submission, in the
// write transaction tx.
func (s *Store) jobSubmit(ctx context.Context, tx *writeTx, params *store.JobSubmitParams, args dbsqlite.JobInsertParams, now int64) (*store.JobSubmitResult, error) {
	inserted, err := s.q.IdempotencyKeyInsert(ctx, tx, dbsqlite.IdempotencyKeyInsertParams{
		Tenant:      params.Tenant,
		Method:      params.Method,
		IdemKey:     params.IdempotencyKey,
		Fingerprint: params.Fingerprint,
		JobID:       args.ID,
		CreatedAt:   now,
	})
	if err != nil {
		return nil, interpretError(err)
	}
	if inserted == 0 {
		res, err := s.jobSubmitExisting(ctx, tx, params)
		if err != nil {
			return nil, err
		}
		return res, s.runItemRecord(ctx, tx, params, res, now)
	}

	err = s.q.DocumentInsert(ctx, tx, dbsqlite.DocumentInsertParams{
		Tenant:    params.Tenant,
		Sha256:    params.DocumentSHA256,
		MediaType: params.DocumentMedia,
		Data:      rowmap.NonNilSlice(params.Document),
		SizeBytes: int64(len(params.Document)),
		CreatedAt: now,
	})
	if err != nil {
		return nil, interpretError(err)
	}

	source, err := s.q.JobGetComputedSuccess(ctx, tx, dbsqlite.JobGetComputedSuccessParams{
		Tenant:   params.Tenant,
		DedupKey: params.DedupKey,
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		args.Status = string(store.JobStatusQueued)
		args.Stage = string(store.JobStageUploaded)
	case err != nil:
		return nil, interpretError(err)
	default:
		args.Status = string(store.JobStatusSucceeded)
		args.Stage = string(store.JobStagePublished)
		args.Output = source.Output
		args.DeduplicatedFrom = &source.ID
		args.FinishedAt = &now
	}
	args.CreatedAt, args.UpdatedAt = now, now

	row, err := s.q.JobInsert(ctx, tx, args)
	if err != nil {
		return nil, interpretError(err)
	}
	message, outcome := store.SubmitMessage(rowmap.Deref(row.DeduplicatedFrom))
	if err := s.jobEventAppend(ctx, tx, row.ID, message); err != nil {
		return nil, err
	}
	job, err := jobFromRow(row)
	if err != nil {
		return nil, err
	}
	res := &store.JobSubmitResult{Job: job, Outcome: outcome}
	return res, s.runItemRecord(ctx, tx, params, res, now)
}

// jobSubmitExisting returns the job an existing key created, or
// ErrIdempotencyKeyReused. It writes nothing.
func (s *Store) jobSubmitExisting(ctx context.Context, tx *writeTx, params *store.JobSubmitParams) (*store.JobSubmitResult, error) {
	existing, err := s.q.JobGetByIdempotencyKey(ctx, tx, dbsqlite.JobGetByIdempotencyKeyParams{
		Tenant:         params.Tenant,
		Method:         params.Method,
		IdempotencyKey: params.IdempotencyKey,
	})
	if err != nil {
		return nil, interpretError(err)
	}
	job, err := jobFromRow(existing.Job)
	if err != nil {
		return nil, err
	}
	return store.JobSubmitExisting(params.Fingerprint, existing.Fingerprint, job)
}

// jobInsertArgs validates and encodes what JobSubmit stores whatever the
// outcome; the status and timestamps are decided in the transaction.
func jobInsertArgs(p *store.JobSubmitParams) (dbsqlite.JobInsertParams, error) {
	id, err := uuid.Parse(p.ID)
	if err != nil {
		return dbsqlite.JobInsertParams{}, fmt.Errorf("storesqlite: job id %q: %w", p.ID, store.ErrInvalidRow)
	}
	labels, err := json.Marshal(rowmap.NonNilMap(p.Labels))
	if err != nil {
		return dbsqlite.JobInsertParams{}, fmt.Errorf("storesqlite: labels: %w", err)
	}
	jobParams := string(p.Params)
	if jobParams == "" {
		jobParams = "{}"
	}
	return dbsqlite.JobInsertParams{
		ID:                id.String(),
		Tenant:            p.Tenant,
		IdempotencyKey:    p.IdempotencyKey,
		DedupKey:          p.DedupKey,
		Pipeline:          p.Pipeline,
		PipelineVersion:   int64(p.PipelineVersion),
		PromptVersion:     p.PromptVersion,
		ModelProfile:      p.ModelProfile,
		DocumentSha256:    p.DocumentSHA256,
		DocumentMediaType: p.DocumentMedia,
		DocumentName:      p.DocumentName,
		DocumentSizeBytes: int64(len(p.Document)),
		Params:            jobParams,
		Labels:            string(labels),
		Traceparent:       p.Traceparent,
		RunID:             nilIfEmpty(p.RunID),
		Priority:          storedPriority(p),
	}, nil
}

// JobGetByID implements store.Store.
func (s *Store) JobGetByID(ctx context.Context, params *store.JobGetByIDParams) (*store.Job, error) {
	id, ok := canonicalUUID(params.ID)
	if !ok {
		return nil, store.ErrNotFound // no job has an id that is not a uuid
	}
	row, err := s.q.JobGetByID(ctx, s.read, dbsqlite.JobGetByIDParams{Tenant: params.Tenant, ID: id})
	return rowmap.OneErr(row, err, interpretError, func(row dbsqlite.Job) (*store.Job, error) {
		return s.job(ctx, row)
	})
}

// JobList implements store.Store. It fetches one row more than the page
// (by count or by bytes) to know whether a next page exists.
func (s *Store) JobList(ctx context.Context, params *store.JobListParams) (*store.JobListResult, error) {
	limit := params.PageLimit()
	args := dbsqlite.JobListParams{
		Tenant:   params.Tenant,
		Status:   string(params.Status),
		Pipeline: params.Pipeline,
		RunID:    params.RunID,
		Max:      int64(limit) + 1,
	}
	var err error
	if args.AfterCreatedAt, args.AfterID, err = cursorAfter(params.After); err != nil {
		return nil, err
	}
	args.MaxBytes = params.PageBytes()
	rows, err := s.q.JobList(ctx, s.read, args)
	jobs, err := rowmap.MapErr(rows, err, interpretError, func(r dbsqlite.JobListRow) (store.SizedJob, error) {
		j, err := jobFromRow(r.Job)
		return store.SizedJob{Job: j, Bytes: r.Bytes}, err
	})
	if err != nil {
		return nil, err
	}
	return rundefaults.ListPage(ctx, s.runs, jobs, limit, params.PageBytes())
}

// canonicalUUID returns s in the form ids are stored in (lowercase, with
// hyphens), accepting what Postgres's uuid type accepts.
func canonicalUUID(s string) (string, bool) {
	id, err := uuid.Parse(s)
	if err != nil {
		return "", false
	}
	return id.String(), true
}

// cursorAfter is where a page of a list newest first starts: after the
// cursor's created_at (unix microseconds) and id. Without a cursor (the
// first page) it starts after every row (see JobList in job.sql).
func cursorAfter(after *store.JobCursor) (int64, string, error) {
	if after == nil {
		return math.MaxInt64, "", nil
	}
	id, ok := canonicalUUID(after.ID)
	if !ok {
		return 0, "", fmt.Errorf("storesqlite: cursor id %q is not a uuid: %w", after.ID, store.ErrInvalidRow)
	}
	return after.CreatedAt.UnixMicro(), id, nil
}

// storedPriority is the jobs.priority of a submission: NULL for
// interactive.
func storedPriority(p *store.JobSubmitParams) *string {
	if pr := p.PriorityOf(); pr != store.JobPriorityInteractive {
		return new(string(pr))
	}
	return nil
}
