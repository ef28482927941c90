package storesqlite

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// JobCountByStatus implements store.ViewStore. Two statements, not one
// whose pipeline filter may be empty: SQLite plans a statement once, and the
// filter it might need keeps the count from reading the index alone (it
// read every job's row: a third of the embedded server's CPU under a
// console or a script polling the count every 20 ms).
func (s *Store) JobCountByStatus(ctx context.Context, params *store.JobCountByStatusParams) (map[store.JobStatus]int64, error) {
	if params.Pipeline != "" {
		rows, err := s.q.JobCountByStatusPipeline(ctx, s.read, dbsqlite.JobCountByStatusPipelineParams{Tenant: params.Tenant, Pipeline: params.Pipeline})
		return rowmap.Keyed(rows, err, interpretError, func(r dbsqlite.JobCountByStatusPipelineRow) (store.JobStatus, int64) {
			return store.JobStatus(r.Status), r.Count
		})
	}
	rows, err := s.q.JobCountByStatus(ctx, s.read, params.Tenant)
	return rowmap.Keyed(rows, err, interpretError, func(r dbsqlite.JobCountByStatusRow) (store.JobStatus, int64) {
		return store.JobStatus(r.Status), r.Count
	})
}

// JobChangeHead implements store.ViewStore: the last event's id. With one
// writer, every event committed later has a greater id (see JobChangeList).
func (s *Store) JobChangeHead(ctx context.Context, _ *store.JobChangeHeadParams) (store.JobChangeCursor, error) {
	last, err := s.q.JobEventLastID(ctx, s.read)
	if err != nil {
		return store.JobChangeCursor{}, interpretError(err)
	}
	return store.JobChangeCursor{ID: last}, nil
}
