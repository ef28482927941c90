package storepg

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// JobUpdateFull implements store.FactoryStore.
func (s *Store) JobUpdateFull(ctx context.Context, params *store.JobUpdateFullParams) (*store.Job, error) {
	id, err := parseUUID(params.ID)
	if err != nil {
		return nil, store.ErrNotFound
	}
	var leaseOwner *string
	if params.LeaseOwner != "" {
		leaseOwner = &params.LeaseOwner
	}
	row, err := s.q.JobUpdateFull(ctx, s.pool, dbsqlc.JobUpdateFullParams{
		Status:          string(params.Status),
		Stage:           string(params.Stage),
		Attempt:         int64(params.Attempt),
		LeaseOwner:      leaseOwner,
		LeaseUntil:      params.LeaseUntil,
		RunAfter:        params.RunAfter,
		Output:          rowmap.StringOrNil(params.Output),
		Error:           rowmap.StringOrNil(params.ErrorJSON()),
		CancelRequested: params.CancelRequested,
		Approved:        params.Approved,
		FinishedAt:      params.FinishedAt,
		Tenant:          params.Tenant,
		ID:              id,
		Message:         params.Message,
	})
	if err != nil {
		return nil, interpretError(err)
	}
	s.eventCommitted(row.Tenant, row.ID, row.LastEventSeq)
	return s.job(ctx, dbsqlc.Job(row))
}
