package storepg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// Submitting is two statements at most for any number of submissions:
// JobSubmitMany creates a job for every new key (internal/dbsqlc/job.sql),
// then JobGetByIdempotencyKeyMany reads, on a fresh snapshot, the jobs of
// the keys that existed. See docs/architecture.md, "Submitting in batches".

// jobSubmitAttempts bounds the rounds of a submission whose key the
// sweeper freed between the insert that found it and the read of its job,
// and the retries of a statement Postgres aborted to break a deadlock.
const jobSubmitAttempts = 3

// jobSubmitDistinct is store.JobSubmitDistinct: insert, then read what the
// insert found, again for keys freed in between.
func (s *Store) jobSubmitDistinct(ctx context.Context, jobs []*store.JobSubmitParams) ([]store.JobSubmitItem, error) {
	items := make([]store.JobSubmitItem, len(jobs))
	rows := make([]submitRow, len(jobs))
	var pending []int
	for i, p := range jobs {
		var err error
		if rows[i], err = submitRowOf(p); err != nil {
			items[i].Err = err
			continue
		}
		pending = append(pending, i)
	}
	for range jobSubmitAttempts {
		if len(pending) == 0 {
			return items, nil
		}
		existing, err := s.jobSubmitInsert(ctx, rows, pending, items)
		if err != nil {
			return nil, err
		}
		if pending, err = s.jobSubmitExisting(ctx, jobs, existing, items); err != nil {
			return nil, err
		}
		if err := s.runItemsOfExisting(ctx, jobs, existing, items); err != nil {
			return nil, err
		}
	}
	for _, i := range pending {
		items[i].Err = fmt.Errorf("storepg: idempotency key freed and taken again %d times in a row", jobSubmitAttempts)
	}
	return items, nil
}

// jobSubmitInsert runs JobSubmitMany over rows[idx] and answers each job it
// created; it returns the indexes whose key existed. When Postgres refuses
// the statement for a value of some row, it halves idx until each refused
// row stands alone, answered with ErrInvalidRow, and the others are
// written: one bad row costs a few statements, never the others' writes.
func (s *Store) jobSubmitInsert(ctx context.Context, rows []submitRow, idx []int, items []store.JobSubmitItem) (existing []int, err error) {
	created, err := s.jobSubmitStatement(ctx, rows, idx)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
	case errors.As(err, &pgErr) && isRowError(pgErr) && len(idx) > 1:
		half := len(idx) / 2
		a, err := s.jobSubmitInsert(ctx, rows, idx[:half], items)
		if err != nil {
			return nil, err
		}
		b, err := s.jobSubmitInsert(ctx, rows, idx[half:], items)
		if err != nil {
			return nil, err
		}
		return append(a, b...), nil
	case errors.As(err, &pgErr) && isRowError(pgErr):
		items[idx[0]].Err = fmt.Errorf("storepg: %w: %s", store.ErrInvalidRow, pgErr.Message)
		return nil, nil
	default:
		return nil, interpretError(err)
	}

	byID := make(map[string]int, len(idx))
	for _, i := range idx {
		byID[rows[i].id] = i
	}
	for _, row := range created {
		s.eventCommitted(row.Tenant, row.ID, row.LastEventSeq)
		job, err := jobFromRow(dbsqlc.Job(row))
		if err != nil {
			return nil, err
		}
		i := byID[job.ID]
		_, outcome := store.SubmitMessage(job.DeduplicatedFrom)
		items[i] = store.JobSubmitItem{Job: job, Outcome: outcome}
		delete(byID, job.ID)
	}
	for _, i := range idx {
		if _, left := byID[rows[i].id]; left {
			existing = append(existing, i)
		}
	}
	return existing, nil
}

// jobSubmitStatement runs JobSubmitMany once over rows[idx], again when
// Postgres aborted it to break a deadlock (the inserts' order makes that
// rare; an aborted statement wrote nothing). It is named while the submit
// plan gate is open (plan_cache.go): its parse, analysis and plan are
// then made once per connection, not per group.
func (s *Store) jobSubmitStatement(ctx context.Context, rows []submitRow, idx []int) ([]dbsqlc.JobSubmitManyRow, error) {
	args := submitArgs(rows, idx)
	var created []dbsqlc.JobSubmitManyRow
	err := againIfAborted(func() (err error) {
		created, err = s.q.JobSubmitMany(ctx, gated{s}, args)
		return err
	})
	if err != nil {
		return nil, err
	}
	return created, nil
}

// jobSubmitExisting answers the submissions jobs[idx] whose keys existed
// from a fresh read, and returns those whose key is gone (freed by the
// sweeper since the insert found it): they are new again.
func (s *Store) jobSubmitExisting(ctx context.Context, jobs []*store.JobSubmitParams, idx []int, items []store.JobSubmitItem) (freed []int, err error) {
	if len(idx) == 0 {
		return nil, nil
	}
	args := dbsqlc.JobGetByIdempotencyKeyManyParams{
		Tenant:         make([]string, len(idx)),
		Method:         make([]string, len(idx)),
		IdempotencyKey: make([]string, len(idx)),
	}
	for j, i := range idx {
		args.Tenant[j], args.Method[j], args.IdempotencyKey[j] = jobs[i].Tenant, jobs[i].Method, jobs[i].IdempotencyKey
	}
	found, err := s.q.JobGetByIdempotencyKeyMany(ctx, s.pool, args)
	if err != nil {
		return nil, interpretError(err)
	}
	answered := make([]bool, len(idx))
	for _, row := range found {
		j := int(row.Ord) - 1
		job, err := jobFromRow(row.Job)
		if err != nil {
			return nil, err
		}
		i := idx[j]
		res, err := store.JobSubmitExisting(jobs[i].Fingerprint, row.Fingerprint, job)
		if err != nil {
			items[i] = store.JobSubmitItem{Err: err}
		} else {
			items[i] = store.JobSubmitItem{Job: res.Job, Outcome: res.Outcome}
		}
		answered[j] = true
	}
	for j, i := range idx {
		if !answered[j] {
			freed = append(freed, i)
		}
	}
	return freed, nil
}

// submitRow is one submission encoded for JobSubmitMany's arrays.
type submitRow struct {
	p      *store.JobSubmitParams
	id     string // canonical form, as the job row returns it
	labels string
	params string
	run    string // "" (NULL) outside a run
}

func submitRowOf(p *store.JobSubmitParams) (submitRow, error) {
	id, err := parseUUID(p.ID)
	if err != nil {
		return submitRow{}, fmt.Errorf("storepg: job id %q: %w", p.ID, store.ErrInvalidRow)
	}
	labels, err := json.Marshal(rowmap.NonNilMap(p.Labels))
	if err != nil {
		return submitRow{}, fmt.Errorf("storepg: labels: %w", err)
	}
	row := submitRow{p: p, id: id, labels: string(labels), params: rowmap.JSONObject(p.Params)}
	if p.RunID != "" {
		if row.run, err = parseUUID(p.RunID); err != nil {
			return submitRow{}, fmt.Errorf("storepg: run id %q: %w", p.RunID, store.ErrInvalidRow)
		}
	}
	return row, nil
}

// submitArgs are JobSubmitMany's arrays of rows[idx].
func submitArgs(rows []submitRow, idx []int) dbsqlc.JobSubmitManyParams {
	n := len(idx)
	a := dbsqlc.JobSubmitManyParams{
		ID: make([]string, n), Tenant: make([]string, n), Method: make([]string, n),
		IdempotencyKey: make([]string, n), Fingerprint: make([]string, n), DedupKey: make([]string, n),
		Pipeline: make([]string, n), PipelineVersion: make([]int64, n), PromptVersion: make([]string, n),
		ModelProfile: make([]string, n), DocumentSha256: make([]string, n), DocumentMediaType: make([]string, n),
		Documents: documentsOf(rows, idx), DocumentStart: make([]int64, n), DocumentSize: make([]int64, n),
		DocumentName: make([]string, n), Params: make([]string, n),
		Labels: make([]string, n), RunID: make([]string, n), Traceparent: make([]string, n),
		Priority: make([]string, n),
	}
	start := int64(1)
	for j, i := range idx {
		r := rows[i]
		p := r.p
		a.ID[j] = r.id
		a.Tenant[j], a.Method[j], a.IdempotencyKey[j] = p.Tenant, p.Method, p.IdempotencyKey
		a.Fingerprint[j], a.DedupKey[j] = p.Fingerprint, p.DedupKey
		a.Pipeline[j], a.PipelineVersion[j] = p.Pipeline, int64(p.PipelineVersion)
		a.PromptVersion[j], a.ModelProfile[j] = p.PromptVersion, p.ModelProfile
		a.DocumentSha256[j], a.DocumentMediaType[j] = p.DocumentSHA256, p.DocumentMedia
		a.DocumentStart[j], a.DocumentSize[j], a.DocumentName[j] = start, int64(len(p.Document)), p.DocumentName
		start += int64(len(p.Document))
		a.Params[j], a.Labels[j], a.RunID[j] = r.params, r.labels, r.run
		a.Traceparent[j], a.Priority[j] = p.Traceparent, storedPriority(p)
	}
	return a
}

// documentsOf is the documents of rows[idx] in one slice, in their order,
// allocated once: JobSubmitMany cuts each from it by its start and size.
// Never nil, so an empty set is an empty bytea, not NULL.
func documentsOf(rows []submitRow, idx []int) []byte {
	size := 0
	for _, i := range idx {
		size += len(rows[i].p.Document)
	}
	docs := make([]byte, 0, size)
	for _, i := range idx {
		docs = append(docs, rows[i].p.Document...)
	}
	return docs
}

// isRowError reports whether Postgres refused a statement for a value it
// was given: a data exception (class 22: a NUL byte in text, JSON that does
// not parse) or an integrity violation (class 23: a check, a taken id).
// Anything else (a lost connection, a cancelled or deadlocked statement)
// is about the store, not the rows.
func isRowError(e *pgconn.PgError) bool {
	class := e.Code[:2]
	return class == "22" || class == "23"
}

// storedPriority is the jobs.priority of a submission: "" (NULL) for
// interactive.
func storedPriority(p *store.JobSubmitParams) string {
	if pr := p.PriorityOf(); pr != store.JobPriorityInteractive {
		return string(pr)
	}
	return ""
}
