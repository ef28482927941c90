package storepg

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// ProviderBatchRecord implements store.ProviderBatchStore.
func (s *Store) ProviderBatchRecord(ctx context.Context, params *store.ProviderBatchRecordParams) error {
	return interpretError(s.q.ProviderBatchUpsert(ctx, s.pool, dbsqlc.ProviderBatchUpsertParams{
		Tag: params.Tag, BatchID: params.BatchID, Status: params.Status, CreatedAt: params.CreatedAt, ExpiresAt: params.ExpiresAt,
	}))
}

// ProviderBatchBillsRecord implements store.ProviderBatchStore.
func (s *Store) ProviderBatchBillsRecord(ctx context.Context, params *store.ProviderBatchBillsRecordParams) error {
	if len(params.ProviderKeys) == 0 {
		return nil
	}
	return interpretError(s.q.ProviderBatchBillsInsert(ctx, s.pool, dbsqlc.ProviderBatchBillsInsertParams{
		Tag: params.Tag, ProviderKeys: params.ProviderKeys,
	}))
}

// ProviderBatchListStale implements store.ProviderBatchStore.
func (s *Store) ProviderBatchListStale(ctx context.Context, params *store.ProviderBatchListStaleParams) ([]*store.ProviderBatch, error) {
	rows, err := s.q.ProviderBatchListStale(ctx, s.pool, dbsqlc.ProviderBatchListStaleParams{
		StaleBefore: params.StaleBefore, MaxBatches: int64(min(max(params.Limit, 0), 10_000)),
	})
	return rowmap.Map(rows, err, interpretError, func(r dbsqlc.ProviderBatchListStaleRow) *store.ProviderBatch {
		return &store.ProviderBatch{Tag: r.Tag, BatchID: r.BatchID, Status: r.Status}
	})
}

// ProviderBatchJobs implements store.ProviderBatchStore.
func (s *Store) ProviderBatchJobs(ctx context.Context, params *store.ProviderBatchJobsParams) ([]*store.ProviderBatchJob, error) {
	rows, err := s.q.ProviderBatchJobs(ctx, s.pool, store.BatchIntentPrefix+params.Tag)
	return rowmap.Map(rows, err, interpretError, func(r dbsqlc.ProviderBatchJobsRow) *store.ProviderBatchJob {
		return &store.ProviderBatchJob{JobID: r.JobID, Status: store.JobStatus(r.Status)}
	})
}

// RunBatchList implements store.ProviderBatchStore.
func (s *Store) RunBatchList(ctx context.Context, params *store.RunBatchListParams) ([]*store.RunBatch, error) {
	id, err := parseUUID(params.RunID)
	if err != nil {
		return nil, nil
	}
	rows, err := s.q.RunBatchList(ctx, s.pool, dbsqlc.RunBatchListParams{RunID: id, Tenant: params.Tenant})
	return rowmap.Map(rows, err, interpretError, func(r dbsqlc.RunBatchListRow) *store.RunBatch {
		return &store.RunBatch{
			BatchID: r.BatchID, Status: r.Status, Lines: r.Lines, AnsweredLines: r.AnsweredLines, CostMicros: r.CostMicros, BilledLines: r.BilledLines,
			CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, ExpiresAt: r.ExpiresAt,
		}
	})
}
