package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// exerciseStats is the conformance suite of store.StatsStore.
func exerciseStats(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()

	t.Run("CountsUnfinishedJobsAndTheClaimableQueue", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()

		empty, err := s.JobStats(ctx, &store.JobStatsParams{})
		require.NoError(t, err)
		require.Empty(t, empty.Active)
		require.Zero(t, empty.Claimable)
		require.Nil(t, empty.OldestClaimableAt)

		// Three queued jobs of two pipelines; one claimed (running), one
		// published (finished: not counted).
		before := time.Now().Add(-time.Second)
		var jobs []*store.Job
		for _, pipeline := range []string{"invoice", "invoice", "summarize", "invoice"} {
			p := newSubmitParams(t)
			p.Pipeline = pipeline
			p.Traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			jobs = append(jobs, submit(t, s, p))
		}
		require.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", jobs[0].Traceparent, "the job keeps its submitter's trace context")
		claimed, err := s.JobClaim(ctx, &store.JobClaimParams{Owner: "w", Limit: 2, LeaseDuration: engineLease})
		require.NoError(t, err)
		require.Len(t, claimed, 2)
		_, err = Publish(ctx, s, &store.JobPublishParams{Lease: leaseOf(claimed[1]), Output: []byte(`{}`), Message: "published"})
		require.NoError(t, err)

		stats, err := s.JobStats(ctx, &store.JobStatsParams{})
		require.NoError(t, err)
		require.ElementsMatch(t, []store.JobStatusCount{
			{Status: store.JobStatusRunning, Pipeline: "invoice", Jobs: 1},
			{Status: store.JobStatusQueued, Pipeline: "invoice", Jobs: 1},
			{Status: store.JobStatusQueued, Pipeline: "summarize", Jobs: 1},
		}, stats.Active)
		require.EqualValues(t, 2, stats.Claimable, "the two queued jobs; the running one holds its lease")
		require.NotNil(t, stats.OldestClaimableAt)
		require.WithinDuration(t, jobs[2].CreatedAt, *stats.OldestClaimableAt, time.Millisecond, "the oldest queued job")
		require.True(t, stats.OldestClaimableAt.After(before))
	})

	t.Run("MeasuresTheRelaysBacklog", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()

		empty, err := s.OutboxStats(ctx, &store.OutboxStatsParams{})
		require.NoError(t, err)
		require.Zero(t, empty.Unrouted)
		require.Nil(t, empty.OldestUnroutedAt)
		require.Empty(t, empty.Pending)

		// Two published jobs: two job.succeeded events, not routed yet.
		before := time.Now().Add(-time.Second)
		for range 2 {
			submit(t, s, newSubmitParams(t))
			job := claimOne(t, s, "w", engineLease)
			_, err := Publish(ctx, s, &store.JobPublishParams{Lease: leaseOf(job), Output: []byte(`{}`), Message: "published"})
			require.NoError(t, err)
		}
		unrouted, err := s.OutboxStats(ctx, &store.OutboxStatsParams{})
		require.NoError(t, err)
		require.EqualValues(t, 2, unrouted.Unrouted)
		require.NotNil(t, unrouted.OldestUnroutedAt)
		require.True(t, unrouted.OldestUnroutedAt.After(before))
		require.Empty(t, unrouted.Pending)

		// Routed to two sinks each: four pending deliveries, none unrouted.
		n, err := s.OutboxRoute(ctx, &store.OutboxRouteParams{Route: func(*store.OutboxEvent) []string { return []string{"hook", "stream"} }})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		routed, err := s.OutboxStats(ctx, &store.OutboxStatsParams{})
		require.NoError(t, err)
		require.Zero(t, routed.Unrouted)
		require.Nil(t, routed.OldestUnroutedAt)
		require.Len(t, routed.Pending, 2)
		for _, p := range routed.Pending {
			require.Contains(t, []string{"hook", "stream"}, p.Sink)
			require.EqualValues(t, 2, p.Deliveries)
			require.True(t, p.OldestAt.After(before), "sink %s: oldest %s", p.Sink, p.OldestAt)
		}
	})
}
