package storesqlite

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// JobStats implements store.StatsStore: two index scans on the read pool.
func (s *Store) JobStats(ctx context.Context, _ *store.JobStatsParams) (*store.JobStats, error) {
	rows, err := s.q.JobStatsActive(ctx, s.read)
	active, err := rowmap.Map(rows, err, interpretError, func(r dbsqlite.JobStatsActiveRow) store.JobStatusCount {
		return store.JobStatusCount{Status: store.JobStatus(r.Status), Pipeline: r.Pipeline, Jobs: r.Jobs}
	})
	if err != nil {
		return nil, err
	}
	stats := &store.JobStats{Active: active}
	q, err := s.q.JobStatsClaimable(ctx, s.read, s.clock.now())
	if err != nil {
		return nil, interpretError(err)
	}
	stats.Claimable = q.Claimable
	if q.Claimable > 0 {
		oldest := timeFrom(q.Oldest)
		stats.OldestClaimableAt = &oldest
	}
	return stats, nil
}

// OutboxStats implements store.StatsStore: two walks of partial indexes
// (the unrouted events, the pending deliveries) on the read pool.
func (s *Store) OutboxStats(ctx context.Context, _ *store.OutboxStatsParams) (*store.OutboxStats, error) {
	u, err := s.q.OutboxStatsUnrouted(ctx, s.read)
	if err != nil {
		return nil, interpretError(err)
	}
	stats := &store.OutboxStats{Unrouted: u.Events}
	if u.Events > 0 {
		oldest := timeFrom(u.Oldest)
		stats.OldestUnroutedAt = &oldest
	}
	rows, err := s.q.OutboxStatsPending(ctx, s.read)
	if err != nil {
		return nil, interpretError(err)
	}
	for _, r := range rows {
		stats.Pending = append(stats.Pending, store.SinkPending{Sink: r.Sink, Deliveries: r.Deliveries, OldestAt: timeFrom(r.Oldest)})
	}
	return stats, nil
}
