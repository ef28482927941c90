package storesqlite

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/internal/rundefaults"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// JobChangeList implements store.WatchStore. An event's id is its place in
// the change order and its cursor is {Tx: 0, ID: id}: with one writer,
// insert order is commit order and a reader sees only whole commits, so
// nothing committed later can sort before an id already read, and SQLite
// needs no snapshot bound like Postgres's (migrations/sqlite/0003_watch.up.sql).
func (s *Store) JobChangeList(ctx context.Context, params *store.JobChangeListParams) ([]*store.JobChange, error) {
	if params.After.Tx > 0 {
		return nil, nil // after every {0, id}: no event of this store follows it
	}
	afterID := params.After.ID
	if params.After.Tx < 0 {
		afterID = 0 // before every {0, id}
	}
	rows, err := s.q.JobChangeList(ctx, s.read, dbsqlite.JobChangeListParams{
		Tenant:   params.Tenant,
		AfterID:  afterID,
		Status:   string(params.Status),
		Pipeline: params.Pipeline,
		Max:      int64(params.PageLimit()),
		MaxBytes: params.PageBytes(),
	})
	changes, err := rowmap.MapErr(rows, err, interpretError, func(r dbsqlite.JobChangeListRow) (*store.JobChange, error) {
		r.Job.Output = nil // not read into the job only to be dropped
		job, err := jobFromRow(r.Job)
		if err != nil {
			return nil, err
		}
		return store.NewJobChange(store.JobChangeCursor{ID: r.JobEvent.ID}, jobEventFromRow(r.JobEvent), job, r.Bytes), nil
	})
	if err != nil {
		return nil, err
	}
	return rundefaults.Changes(ctx, s.runs, changes, params.PageBytes())
}
