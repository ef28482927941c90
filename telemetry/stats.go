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
	statsUpDesc = prometheus.NewDesc("oncejob_store_stats_up",
		"1 when the store answered the last scrape's questions, 0 when it did not (the gauges above are then missing).", nil, nil)
)

// StatsCollector is the store's view of the queue, read at scrape time
// (store.StatsStore: index scans of the unfinished jobs) and cached for
// StatsMaxAge.
type StatsCollector struct {
	store  store.StatsStore
	logger *slog.Logger
	now    func() time.Time

	mu    sync.Mutex
	at    time.Time
	stats *store.JobStats
	err   error
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
	ch <- statsUpDesc
}

// Collect implements prometheus.Collector.
func (c *StatsCollector) Collect(ch chan<- prometheus.Metric) {
	stats, err := c.snapshot()
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
}

// snapshot returns the cached stats, asking the store when they are older
// than StatsMaxAge. Concurrent scrapes wait for one question.
func (c *StatsCollector) snapshot() (*store.JobStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && c.now().Sub(c.at) < StatsMaxAge {
		return c.stats, c.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	stats, err := c.store.JobStats(ctx, &store.JobStatsParams{})
	if err != nil && c.err == nil {
		c.logger.Warn("metrics: the store did not answer the queue's stats", "error", err)
	}
	c.at, c.stats, c.err = c.now(), stats, err
	return stats, err
}
