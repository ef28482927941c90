package storepg

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// JobCountByStatus implements store.ViewStore.
func (s *Store) JobCountByStatus(ctx context.Context, params *store.JobCountByStatusParams) (map[store.JobStatus]int64, error) {
	args := dbsqlc.JobCountByStatusParams{Tenant: params.Tenant}
	if params.Pipeline != "" {
		args.Pipeline = &params.Pipeline
	}
	rows, err := s.q.JobCountByStatus(ctx, s.pool, args)
	return rowmap.Keyed(rows, err, interpretError, func(r dbsqlc.JobCountByStatusRow) (store.JobStatus, int64) {
		return store.JobStatus(r.Status), r.Count
	})
}

// JobChangeHead implements store.ViewStore. The head is the snapshot's
// xmin, as the listener's tail starts from: every transaction below it has
// ended, so every event not yet readable has tx >= xmin and sorts after
// (xmin, 0); ids start at 1. Events of transactions at or above xmin that
// committed before this call are readable later and sent again to a watch
// from here, which the contract allows.
func (s *Store) JobChangeHead(ctx context.Context, _ *store.JobChangeHeadParams) (store.JobChangeCursor, error) {
	xmin, err := s.q.JobEventTailStart(ctx, s.pool)
	if err != nil {
		return store.JobChangeCursor{}, interpretError(err)
	}
	return store.JobChangeCursor{Tx: xmin}, nil
}
