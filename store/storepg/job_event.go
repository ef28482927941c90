package storepg

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// JobEventList implements store.Store. An empty page costs a second query to
// tell "no new events" from "no such job".
func (s *Store) JobEventList(ctx context.Context, params *store.JobEventListParams) ([]*store.JobEvent, error) {
	id, err := parseUUID(params.JobID)
	if err != nil {
		return nil, store.ErrNotFound
	}
	rows, err := s.q.JobEventList(ctx, s.pool, dbsqlc.JobEventListParams{
		Tenant:   params.Tenant,
		JobID:    id,
		AfterSeq: int64(params.AfterSeq),
		Max:      int64(params.PageLimit()),
	})
	events, err := rowmap.Map(rows, err, interpretError, jobEventFromRow)
	if err != nil {
		return nil, err
	}
	return store.JobEventListPage(events, func() (bool, error) {
		exists, err := s.q.JobExists(ctx, s.pool, dbsqlc.JobExistsParams{Tenant: params.Tenant, ID: id})
		return exists, interpretError(err)
	})
}
