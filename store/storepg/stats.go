package storepg

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// JobStats implements store.StatsStore: two index scans, read outside any
// transaction (the counts need not agree to the row).
func (s *Store) JobStats(ctx context.Context, _ *store.JobStatsParams) (*store.JobStats, error) {
	rows, err := s.q.JobStatsActive(ctx, s.pool)
	active, err := rowmap.Map(rows, err, interpretError, func(r dbsqlc.JobStatsActiveRow) store.JobStatusCount {
		return store.JobStatusCount{Status: store.JobStatus(r.Status), Pipeline: r.Pipeline, Jobs: r.Jobs}
	})
	if err != nil {
		return nil, err
	}
	stats := &store.JobStats{Active: active}
	q, err := s.q.JobStatsClaimable(ctx, s.pool)
	if err != nil {
		return nil, interpretError(err)
	}
	stats.Claimable = q.Claimable
	if q.Claimable > 0 {
		stats.OldestClaimableAt = &q.Oldest
	}
	return stats, nil
}

// OutboxStats implements store.StatsStore: two walks of partial indexes
// (the unrouted events, the pending deliveries).
func (s *Store) OutboxStats(ctx context.Context, _ *store.OutboxStatsParams) (*store.OutboxStats, error) {
	u, err := s.q.OutboxStatsUnrouted(ctx, s.pool)
	if err != nil {
		return nil, interpretError(err)
	}
	stats := &store.OutboxStats{Unrouted: u.Events}
	if u.Events > 0 {
		stats.OldestUnroutedAt = &u.Oldest
	}
	rows, err := s.q.OutboxStatsPending(ctx, s.pool)
	if err != nil {
		return nil, interpretError(err)
	}
	for _, r := range rows {
		stats.Pending = append(stats.Pending, store.SinkPending{Sink: r.Sink, Deliveries: r.Deliveries, OldestAt: r.Oldest})
	}
	return stats, nil
}
