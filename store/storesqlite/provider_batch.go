package storesqlite

import (
	"context"
	"encoding/json"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// ProviderBatchRecord implements store.ProviderBatchStore.
func (s *Store) ProviderBatchRecord(ctx context.Context, params *store.ProviderBatchRecordParams) error {
	var expires *int64
	if params.ExpiresAt != nil {
		e := params.ExpiresAt.UnixMicro()
		expires = &e
	}
	return s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		return interpretError(s.q.ProviderBatchUpsert(ctx, tx, dbsqlite.ProviderBatchUpsertParams{
			Tag: params.Tag, BatchID: params.BatchID, Status: params.Status,
			CreatedAt: params.CreatedAt.UnixMicro(), ExpiresAt: expires, UpdatedAt: now,
		}))
	})
}

// ProviderBatchBillsRecord implements store.ProviderBatchStore.
func (s *Store) ProviderBatchBillsRecord(ctx context.Context, params *store.ProviderBatchBillsRecordParams) error {
	if len(params.ProviderKeys) == 0 {
		return nil
	}
	keys, err := json.Marshal(params.ProviderKeys)
	if err != nil {
		return err
	}
	return s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, _ int64) error {
		return interpretError(s.q.ProviderBatchBillsInsert(ctx, tx, dbsqlite.ProviderBatchBillsInsertParams{
			Tag: params.Tag, ProviderKeys: string(keys),
		}))
	})
}

// ProviderBatchListStale implements store.ProviderBatchStore.
func (s *Store) ProviderBatchListStale(ctx context.Context, params *store.ProviderBatchListStaleParams) ([]*store.ProviderBatch, error) {
	rows, err := s.q.ProviderBatchListStale(ctx, s.read, dbsqlite.ProviderBatchListStaleParams{
		StaleBefore: params.StaleBefore.UnixMicro(), MaxBatches: int64(max(params.Limit, 0)),
	})
	return rowmap.Map(rows, err, interpretError, func(r dbsqlite.ProviderBatchListStaleRow) *store.ProviderBatch {
		return &store.ProviderBatch{Tag: r.Tag, BatchID: r.BatchID, Status: r.Status}
	})
}

// ProviderBatchJobs implements store.ProviderBatchStore.
func (s *Store) ProviderBatchJobs(ctx context.Context, params *store.ProviderBatchJobsParams) ([]*store.ProviderBatchJob, error) {
	rows, err := s.q.ProviderBatchJobs(ctx, s.read, store.BatchIntentPrefix+params.Tag)
	return rowmap.Map(rows, err, interpretError, func(r dbsqlite.ProviderBatchJobsRow) *store.ProviderBatchJob {
		return &store.ProviderBatchJob{JobID: r.JobID, Status: store.JobStatus(r.Status)}
	})
}

// RunBatchList implements store.ProviderBatchStore.
func (s *Store) RunBatchList(ctx context.Context, params *store.RunBatchListParams) ([]*store.RunBatch, error) {
	id, ok := canonicalUUID(params.RunID)
	if !ok {
		return nil, nil
	}
	rows, err := s.q.RunBatchList(ctx, s.read, dbsqlite.RunBatchListParams{RunID: id, Tenant: params.Tenant})
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]*store.RunBatch, len(rows))
	for i, r := range rows {
		b := &store.RunBatch{
			BatchID: r.BatchID, Status: r.Status, Lines: r.Lines, AnsweredLines: r.AnsweredLines, CostMicros: r.CostMicros, BilledLines: r.BilledLines,
			CreatedAt: timeFrom(r.CreatedAt), UpdatedAt: timeFrom(r.UpdatedAt),
		}
		if r.ExpiresAt != nil {
			t := timeFrom(*r.ExpiresAt)
			b.ExpiresAt = &t
		}
		out[i] = b
	}
	return out, nil
}
