package storesqlite

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// JobUpdateFull implements store.FactoryStore.
func (s *Store) JobUpdateFull(ctx context.Context, params *store.JobUpdateFullParams) (*store.Job, error) {
	id, ok := canonicalUUID(params.ID)
	if !ok {
		return nil, store.ErrNotFound
	}
	var leaseOwner *string
	if params.LeaseOwner != "" {
		leaseOwner = &params.LeaseOwner
	}
	var row dbsqlite.Job
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		var err error
		row, err = s.q.JobUpdateFull(ctx, tx, dbsqlite.JobUpdateFullParams{
			Status:          string(params.Status),
			Stage:           string(params.Stage),
			Attempt:         int64(params.Attempt),
			LeaseOwner:      leaseOwner,
			LeaseUntil:      microsOrNil(params.LeaseUntil),
			RunAfter:        microsOrNil(params.RunAfter),
			Output:          rowmap.StringOrNil(params.Output),
			Error:           rowmap.StringOrNil(params.ErrorJSON()),
			CancelRequested: params.CancelRequested,
			Approved:        params.Approved,
			FinishedAt:      microsOrNil(params.FinishedAt),
			Now:             now,
			Tenant:          params.Tenant,
			ID:              id,
		})
		if err != nil {
			return interpretError(err)
		}
		return s.jobEventAppend(ctx, tx, row.ID, params.Message)
	})
	if err != nil {
		return nil, err
	}
	return s.job(ctx, row)
}
