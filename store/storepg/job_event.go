package storepg

import (
	"context"

	"github.com/oncejob/oncejob/store"
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
		AfterSeq: params.AfterSeq,
		Max:      int32(params.PageLimit()),
	})
	if err != nil {
		return nil, interpretError(err)
	}
	if len(rows) == 0 {
		exists, err := s.q.JobExists(ctx, s.pool, dbsqlc.JobExistsParams{Tenant: params.Tenant, ID: id})
		if err != nil {
			return nil, interpretError(err)
		}
		if !exists {
			return nil, store.ErrNotFound
		}
	}
	events := make([]*store.JobEvent, len(rows))
	for i, r := range rows {
		events[i] = jobEventFromRow(r)
	}
	return events, nil
}
