package storesqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// The set-wise submission: a batch's keys, documents, jobs and first events
// are one statement per table over a JSON array of the batch (json_each),
// instead of six statements and a savepoint per submission. It runs in one
// savepoint; if anything in it fails (a value the database refuses, which
// fails the whole statement), it is rolled back and the batch runs again
// one savepoint per submission (jobSubmitItem), so a refused submission
// still fails alone.
const (
	sqlSetSavepoint         = "SAVEPOINT submit_set"
	sqlSetRollbackSavepoint = "ROLLBACK TO submit_set"
	sqlSetReleaseSavepoint  = "RELEASE submit_set"
)

// jobSubmitSet answers the submissions jobs (those whose items[i].Err is
// nil) set-wise in tx. It reports false, with items untouched, when the
// set-wise write failed and was rolled back: the caller then runs each
// submission alone. The error returned is the savepoint's, which leaves
// the transaction unusable.
func (s *Store) jobSubmitSet(ctx context.Context, tx *writeTx, jobs []*store.JobSubmitParams, args []dbsqlite.JobInsertParams, items []store.JobSubmitItem) (bool, error) {
	if _, err := tx.ExecContext(ctx, sqlSetSavepoint); err != nil {
		return false, interpretError(err)
	}
	answers, err := s.jobSubmitSetWrite(ctx, tx, jobs, args, items)
	if err != nil {
		if _, err := tx.ExecContext(ctx, sqlSetRollbackSavepoint); err != nil {
			return false, interpretError(err)
		}
	}
	if _, err := tx.ExecContext(ctx, sqlSetReleaseSavepoint); err != nil {
		return false, interpretError(err)
	}
	if err != nil {
		return false, nil
	}
	copy(items, answers)
	return true, nil
}

// jobSubmitSetWrite is jobSubmitSet's write: the keys first, then, for the
// keys that were new, the documents, the jobs (each queued, or succeeded
// from its dedup key's computed success) and their first events; the
// submissions whose key existed are answered from it, as jobSubmit does.
// Each submission gets its own timestamp, in order, as it would alone.
func (s *Store) jobSubmitSetWrite(ctx context.Context, tx *writeTx, jobs []*store.JobSubmitParams, args []dbsqlite.JobInsertParams, items []store.JobSubmitItem) ([]store.JobSubmitItem, error) {
	answers := make([]store.JobSubmitItem, len(jobs))
	copy(answers, items)
	now := make([]int64, len(jobs))
	keys := make([][]any, 0, len(jobs))
	for i, p := range jobs {
		if items[i].Err != nil {
			continue
		}
		now[i] = s.clock.now()
		keys = append(keys, []any{p.Tenant, p.Method, p.IdempotencyKey, p.Fingerprint, args[i].ID, now[i]})
	}
	keysJSON, err := jsonArray(keys)
	if err != nil {
		return nil, err
	}
	inserted, err := s.q.IdempotencyKeyInsertMany(ctx, tx, keysJSON)
	if err != nil {
		return nil, err
	}
	isNew := make(map[string]bool, len(inserted))
	for _, id := range inserted {
		isNew[id] = true
	}
	var docs, rows [][]any
	data := make([]byte, 0, len(jobs)*1024)
	for i, p := range jobs {
		if items[i].Err != nil || !isNew[args[i].ID] {
			continue
		}
		a := args[i]
		docs = append(docs, []any{p.Tenant, p.DocumentSHA256, p.DocumentMedia, len(data) + 1, len(p.Document), now[i]})
		data = append(data, p.Document...)
		rows = append(rows, []any{
			a.ID, a.Tenant, a.IdempotencyKey, a.DedupKey, a.Pipeline, a.PipelineVersion,
			a.PromptVersion, a.ModelProfile, a.DocumentSha256, a.DocumentMediaType, a.DocumentName,
			a.DocumentSizeBytes, a.Params, a.Labels, now[i], a.Traceparent, a.RunID, a.Priority,
		})
	}
	docsJSON, err := jsonArray(docs)
	if err != nil {
		return nil, err
	}
	created, err := s.jobSubmitSetCreate(ctx, tx, dbsqlite.DocumentInsertManyParams{Data: data, Batch: docsJSON}, rows)
	if err != nil {
		return nil, err
	}
	for i, p := range jobs {
		if items[i].Err != nil {
			continue
		}
		res, ok := created[args[i].ID]
		if !ok {
			res, err = s.jobSubmitExisting(ctx, tx, p)
			if errors.Is(err, store.ErrIdempotencyKeyReused) {
				answers[i].Err = err
				continue
			}
			if err != nil {
				return nil, err
			}
		}
		if err := s.runItemRecord(ctx, tx, p, res, now[i]); err != nil {
			return nil, err
		}
		answers[i] = store.JobSubmitItem{Job: res.Job, Outcome: res.Outcome}
	}
	return answers, nil
}

// jobSubmitSetCreate writes the documents, jobs and first events of the
// submissions whose keys were new, and returns their answers by job id.
func (s *Store) jobSubmitSetCreate(ctx context.Context, tx *writeTx, docs dbsqlite.DocumentInsertManyParams, rows [][]any) (map[string]*store.JobSubmitResult, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	if err := s.q.DocumentInsertMany(ctx, tx, docs); err != nil {
		return nil, err
	}
	rowsJSON, err := jsonArray(rows)
	if err != nil {
		return nil, err
	}
	inserted, err := s.q.JobInsertMany(ctx, tx, rowsJSON)
	if err != nil {
		return nil, err
	}
	created := make(map[string]*store.JobSubmitResult, len(inserted))
	events := make([][]any, len(inserted))
	for k, row := range inserted {
		message, outcome := store.SubmitMessage(rowmap.Deref(row.DeduplicatedFrom))
		events[k] = []any{row.ID, message}
		job, err := jobFromRow(row)
		if err != nil {
			return nil, err
		}
		created[row.ID] = &store.JobSubmitResult{Job: job, Outcome: outcome}
	}
	eventsJSON, err := jsonArray(events)
	if err != nil {
		return nil, err
	}
	n, err := s.q.JobEventAppendMany(ctx, tx, eventsJSON)
	if err != nil {
		return nil, err
	}
	if int(n) != len(rows) || len(created) != len(rows) {
		return nil, errors.New("storesqlite: a set-wise submission wrote fewer jobs or events than it was given")
	}
	s.appended.Store(true)
	return created, nil
}

// jsonArray is rows as one JSON array, the parameter json_each reads. Its
// values are strings and integers. A string that is not valid UTF-8 or
// holds a NUL has no faithful JSON form: it fails the set-wise write,
// and the submission is then written alone with its bytes as given.
func jsonArray(rows [][]any) (string, error) {
	b := make([]byte, 0, 64*len(rows)*8)
	b = append(b, '[')
	for r, row := range rows {
		if r > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		for c, v := range row {
			if c > 0 {
				b = append(b, ',')
			}
			switch v := v.(type) {
			case string:
				if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
					return "", errNoJSONForm
				}
				q, err := json.Marshal(v) // valid UTF-8 without NUL: encoded as is
				if err != nil {
					return "", err
				}
				b = append(b, q...)
			case *string: // NULL when nil
				if v == nil {
					b = append(b, "null"...)
					continue
				}
				if !utf8.ValidString(*v) || strings.IndexByte(*v, 0) >= 0 {
					return "", errNoJSONForm
				}
				q, err := json.Marshal(*v)
				if err != nil {
					return "", err
				}
				b = append(b, q...)
			case int:
				b = strconv.AppendInt(b, int64(v), 10)
			case int64:
				b = strconv.AppendInt(b, v, 10)
			default:
				return "", fmt.Errorf("storesqlite: jsonArray: a %T", v)
			}
		}
		b = append(b, ']')
	}
	return string(append(b, ']')), nil
}

var errNoJSONForm = errors.New("storesqlite: a string with no JSON form (invalid UTF-8 or a NUL)")
