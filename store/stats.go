package store

import (
	"context"
	"time"
)

// StatsStore answers the questions of an operator's dashboard, cheaply
// enough to be asked at every scrape of /metrics: each query walks a partial
// index of the unfinished jobs, never the finished ones.
type StatsStore interface {
	// JobStats counts the unfinished jobs by status and pipeline, and
	// measures the claimable queue: the jobs a claim could take now (as
	// JobClaim sees them) and when the oldest of them became claimable.
	JobStats(ctx context.Context, params *JobStatsParams) (*JobStats, error)

	// OutboxStats measures what the relay has still to do: events no relay
	// has routed to their sinks yet, and deliveries routed but not landed,
	// by sink (dead-lettered ones are not counted: nothing will retry them
	// by itself).
	OutboxStats(ctx context.Context, params *OutboxStatsParams) (*OutboxStats, error)
}

type OutboxStatsParams struct{}

// OutboxStats is a snapshot of the relay's backlog.
type OutboxStats struct {
	// Unrouted is how many committed events no relay has routed yet; with
	// no relay running it only grows.
	Unrouted int64
	// OldestUnroutedAt is the commit of the oldest of them; nil when none.
	OldestUnroutedAt *time.Time
	// Pending are the deliveries not yet landed, per sink that has any.
	Pending []SinkPending
}

// SinkPending is the backlog of one sink.
type SinkPending struct {
	Sink       string
	Deliveries int64
	// OldestAt is when the oldest of them was routed.
	OldestAt time.Time
}

type JobStatsParams struct{}

// JobStats is a snapshot of the unfinished jobs.
type JobStats struct {
	// Active counts the jobs of each unfinished status and pipeline; a pair
	// with no job is absent.
	Active []JobStatusCount
	// Claimable is how many jobs a claim could take now.
	Claimable int64
	// OldestClaimableAt is when the longest-waiting claimable job became
	// claimable (submitted, due again, or its lease expired); nil when none
	// is claimable.
	OldestClaimableAt *time.Time
}

// JobStatusCount is the number of jobs of one status and pipeline.
type JobStatusCount struct {
	Status   JobStatus
	Pipeline string
	Jobs     int64
}
