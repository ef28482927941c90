package telemetry

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncejob/oncejob/store"
)

// StatsMaxAge is how long a StatsCollector answers from its last snapshot:
// scrapes closer together than this (several Prometheus servers, a person
// reloading) ask the store once.
const StatsMaxAge = time.Second

// statsTimeout bounds the store's answer: a scrape must not hang on a
// store that does not answer.
const statsTimeout = 3 * time.Second

var (
	jobsDesc = prometheus.NewDesc("oncejob_jobs",
		"Unfinished jobs by status and pipeline, as the store holds them (finished ones are counted by oncejob_jobs_settled_total).",
		[]string{"status", "pipeline"}, nil)
	queueDepthDesc = prometheus.NewDesc("oncejob_queue_depth",
		"Jobs a worker could claim now: queued, due again, or whose lease expired.", nil, nil)
	queueAgeDesc = prometheus.NewDesc("oncejob_queue_oldest_age_seconds",
		"How long the longest-waiting claimable job has been claimable; 0 when none is.", nil, nil)
	unroutedDesc = prometheus.NewDesc("oncejob_outbox_unrouted",
		"Committed events no relay has routed to their sinks yet; with no relay running it only grows.", nil, nil)
	pendingDesc = prometheus.NewDesc("oncejob_deliveries_pending",
		"Deliveries routed to a sink and not landed yet (retrying, or waiting for a relay).", []string{"sink"}, nil)
	outboxAgeDesc = prometheus.NewDesc("oncejob_outbox_oldest_pending_age_seconds",
		"Age of the oldest event not yet delivered: since its commit while unrouted, since its routing while pending; 0 when none is.", nil, nil)
	statsUpDesc = prometheus.NewDesc("oncejob_store_stats_up",
		"1 when the store answered the last scrape's questions, 0 when it did not (the gauges above are then missing).", nil, nil)
)

// StatsCollector is the store's view of the queue and of the relay's
// backlog, read at scrape time (store.StatsStore: walks of partial indexes
// of the unfinished work) and cached for StatsMaxAge.
type StatsCollector struct {
	store  store.StatsStore
	logger *slog.Logger
	now    func() time.Time

	mu     sync.Mutex
	at     time.Time
	stats  *store.JobStats
	outbox *store.OutboxStats
	err    error
}

// NewStatsCollector returns a collector of st's stats.
func NewStatsCollector(st store.StatsStore, logger *slog.Logger) *StatsCollector {
	if logger == nil {
		logger = slog.Default()
	}
	return &StatsCollector{store: st, logger: logger, now: time.Now}
}

// Describe implements prometheus.Collector.
func (c *StatsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobsDesc
	ch <- queueDepthDesc
	ch <- queueAgeDesc
	ch <- unroutedDesc
	ch <- pendingDesc
	ch <- outboxAgeDesc
	ch <- statsUpDesc
}

// Collect implements prometheus.Collector.
func (c *StatsCollector) Collect(ch chan<- prometheus.Metric) {
	stats, outbox, err := c.snapshot()
	if err != nil {
		ch <- prometheus.MustNewConstMetric(statsUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(statsUpDesc, prometheus.GaugeValue, 1)
	for _, a := range stats.Active {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(a.Jobs), string(a.Status), a.Pipeline)
	}
	ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(stats.Claimable))
	age := 0.0
	if stats.OldestClaimableAt != nil {
		age = max(0, c.now().Sub(*stats.OldestClaimableAt).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(queueAgeDesc, prometheus.GaugeValue, age)

	ch <- prometheus.MustNewConstMetric(unroutedDesc, prometheus.GaugeValue, float64(outbox.Unrouted))
	var oldest time.Time
	if outbox.OldestUnroutedAt != nil {
		oldest = *outbox.OldestUnroutedAt
	}
	for _, p := range outbox.Pending {
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(p.Deliveries), p.Sink)
		if oldest.IsZero() || p.OldestAt.Before(oldest) {
			oldest = p.OldestAt
		}
	}
	outboxAge := 0.0
	if !oldest.IsZero() {
		outboxAge = max(0, c.now().Sub(oldest).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(outboxAgeDesc, prometheus.GaugeValue, outboxAge)
}

// snapshot returns the cached stats, asking the store when they are older
// than StatsMaxAge. Concurrent scrapes wait for one question.
func (c *StatsCollector) snapshot() (*store.JobStats, *store.OutboxStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && c.now().Sub(c.at) < StatsMaxAge {
		return c.stats, c.outbox, c.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	stats, err := c.store.JobStats(ctx, &store.JobStatsParams{})
	var outbox *store.OutboxStats
	if err == nil {
		outbox, err = c.store.OutboxStats(ctx, &store.OutboxStatsParams{})
	}
	if err != nil && c.err == nil {
		c.logger.Warn("metrics: the store did not answer the queue's stats", "error", err)
	}
	c.at, c.stats, c.outbox, c.err = c.now(), stats, outbox, err
	return stats, outbox, err
}
