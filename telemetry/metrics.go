// Package telemetry is what oncejob tells its operators: Prometheus metrics
// (the RPCs, the engine, the relay, the queue as the store sees it) and
// OpenTelemetry traces that follow a job from its SubmitJob through every
// stage and LLM call to its publish and deliveries. See docs/operations.md,
// "Metrics to alert on", and docs/architecture.md, "Metrics and traces".
//
// No metric is labelled by tenant or job: their number is unbounded. Job ids
// are attributes of spans, where they belong.
package telemetry

import (
	"net/http"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Buckets of the histograms, in seconds.
var (
	// rpcBuckets: a unary call is milliseconds; a watch stream may be hours
	// and lands in +Inf.
	rpcBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	// workBuckets: a stage or an LLM call, 5ms to 2 minutes.
	workBuckets = prometheus.ExponentialBuckets(0.005, 2.5, 12)
	// waitBuckets: a wait in a queue, 10ms to 4.5 hours.
	waitBuckets = prometheus.ExponentialBuckets(0.01, 3, 14)
)

// Metrics are oncejob's Prometheus metrics in a registry of their own (with
// the Go runtime's and the process's). Make one per process with
// NewMetrics and hand its parts to what they measure.
type Metrics struct {
	registry *prometheus.Registry

	// GRPC measures the server's RPCs; server.Config.Metrics takes it.
	GRPC *grpcprom.ServerMetrics

	jobStartLatency  *prometheus.HistogramVec
	leaseTakeovers   *prometheus.CounterVec
	jobsSettled      *prometheus.CounterVec
	deadLetters      *prometheus.CounterVec
	budgetsExhausted *prometheus.CounterVec
	stageDuration    *prometheus.HistogramVec
	llmCalls         *prometheus.CounterVec
	llmDuration      *prometheus.HistogramVec
	llmTokens        *prometheus.CounterVec
	llmCost          *prometheus.CounterVec
	llmUnknown       *prometheus.CounterVec
	deliveries       *prometheus.CounterVec
	outboxLag        *prometheus.HistogramVec
	relayFailures    *prometheus.CounterVec
}

// NewMetrics returns the metrics, registered.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		registry: reg,
		GRPC: grpcprom.NewServerMetrics(
			grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(rpcBuckets)),
		),
		jobStartLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "oncejob_job_start_latency_seconds",
			Help:    "Time from a job's submission to a worker starting its first attempt: its wait in the queue and its claim.",
			Buckets: waitBuckets,
		}, []string{"pipeline"}),
		leaseTakeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncejob_lease_takeovers_total",
			Help: "Jobs this process claimed from a worker whose lease expired (it died, stalled or lost the store).",
		}, []string{"pipeline"}),
		jobsSettled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncejob_jobs_settled_total",
			Help: "Attempts this process ended, by the status it wrote.",
		}, []string{"pipeline", "status"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncejob_dead_letters_total",
			Help: "Jobs this process dead-lettered.",
		}, []string{"pipeline"}),
		budgetsExhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncejob_budget_exhaustions_total",
			Help: "Jobs dead-lettered because a retry budget was spent, by budget: attempts, deadline or tokens.",
		}, []string{"pipeline", "budget"}),
		stageDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "oncejob_stage_duration_seconds",
			Help:    "Time to produce a stage's (or a chunk's) output, checkpoint included; source is cache (the decision cache) or computed.",
			Buckets: workBuckets,
		}, []string{"pipeline", "stage", "source", "result"}),
		llmCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncejob_llm_calls_total",
			Help: "LLM calls (and look-ups by provider key), by how they ended as journaled.",
		}, []string{"provider", "model", "outcome"}),
		llmDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "oncejob_llm_call_duration_seconds",
			Help:    "Latency of LLM calls, whatever their outcome.",
			Buckets: workBuckets,
		}, []string{"provider", "model"}),
		llmTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncejob_llm_tokens_total",
			Help: "Billed tokens, by kind: prompt or completion. A bill is counted once, as in the job's usage.",
		}, []string{"provider", "model", "kind"}),
		llmCost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncejob_llm_cost_total",
			Help: "Billed cost, in the currency of the model profiles' prices.",
		}, []string{"provider", "model"}),
		llmUnknown: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncejob_llm_unknown_outcomes_total",
			Help: "LLM calls whose outcome is unknown: the client gave up after sending, and the provider may have billed.",
		}, []string{"provider", "model"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncejob_deliveries_total",
			Help: "Delivery attempts of outbox events to sinks, by outcome.",
		}, []string{"sink", "outcome"}),
		outboxLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "oncejob_outbox_lag_seconds",
			Help:    "Time from an event's commit in the outbox to its delivery to a sink.",
			Buckets: waitBuckets,
		}, []string{"sink"}),
		relayFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncejob_relay_round_failures_total",
			Help: "Relay rounds that failed, by step: route, claim or settle. A relay whose claims fail delivers nothing.",
		}, []string{"step"}),
	}
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.GRPC, m.jobStartLatency, m.leaseTakeovers, m.jobsSettled, m.deadLetters, m.budgetsExhausted,
		m.stageDuration, m.llmCalls, m.llmDuration, m.llmTokens, m.llmCost, m.llmUnknown,
		m.deliveries, m.outboxLag, m.relayFailures,
	)
	return m
}

// Handler serves the metrics in Prometheus' text format (GET /metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry, Timeout: 10 * time.Second})
}

// Register adds collectors of the caller's: the store's gauges, the watch
// hub's.
func (m *Metrics) Register(cs ...prometheus.Collector) {
	m.registry.MustRegister(cs...)
}

// WatchersOpen is the gauge of the watch streams open on this server, read
// from open at scrape time.
func WatchersOpen(open func() int64) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "oncejob_watchers_open",
		Help: "WatchJob and WatchJobs streams (and their SSE forms) open on this server.",
	}, func() float64 { return float64(open()) })
}
