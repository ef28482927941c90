package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncejob/oncejob/llm/pace"
)

var (
	limitConfiguredDesc = prometheus.NewDesc("oncejob_provider_limit_configured",
		"A provider limit as configured in the pipelines file, by kind (requests_per_minute, tokens_per_minute, calls_in_flight); absent when not configured.",
		[]string{"limit", "kind"}, nil)
	limitLearnedDesc = prometheus.NewDesc("oncejob_provider_limit_learned",
		"A provider limit as the provider's x-ratelimit-* headers state it (requests_per_minute, tokens_per_minute); absent until an answer said.",
		[]string{"limit", "kind"}, nil)
	limitEffectiveDesc = prometheus.NewDesc("oncejob_provider_limit_effective",
		"The pace in force: the lower of the configured and the learned limit (calls_in_flight 1 while nothing is known).",
		[]string{"limit", "kind"}, nil)
	limitInFlightDesc = prometheus.NewDesc("oncejob_provider_limit_calls_in_flight",
		"Calls in flight under the limit: every process's as of this process's last draw (scope=all), this process's (scope=process).",
		[]string{"limit", "scope"}, nil)
	limitReservedDesc = prometheus.NewDesc("oncejob_provider_limit_reserved_tokens",
		"Tokens reserved by this process's calls in flight (estimated before each call, settled with the provider's usage after).",
		[]string{"limit"}, nil)
	limitWaitingDesc = prometheus.NewDesc("oncejob_provider_limit_waiting_calls",
		"Calls waiting in this process for the limit (jobs waiting longer went back to the queue: oncejob_provider_limit_deferred_total).",
		[]string{"limit"}, nil)
	limitGrantedDesc = prometheus.NewDesc("oncejob_provider_limit_granted_total",
		"Calls the limit let through in this process.", []string{"limit"}, nil)
	limitUsedDesc = prometheus.NewDesc("oncejob_provider_limit_used_tokens_total",
		"Tokens the provider reported used by this process's calls.", []string{"limit"}, nil)
	limit429Desc = prometheus.NewDesc("oncejob_provider_limit_rate_limited_total",
		"429s the provider answered this process's calls; each paused the limit for every process.", []string{"limit"}, nil)
	limitDeferredDesc = prometheus.NewDesc("oncejob_provider_limit_deferred_total",
		"Calls whose wait was longer than a process waits: their jobs went back to the queue until their turn, attempt refunded.", []string{"limit"}, nil)
)

// LimitsCollector reads the provider limits' state from a pacer at scrape
// time.
type LimitsCollector struct{ Stats func() []pace.Stats }

// Describe implements prometheus.Collector.
func (c LimitsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{limitConfiguredDesc, limitLearnedDesc, limitEffectiveDesc, limitInFlightDesc, limitReservedDesc,
		limitWaitingDesc, limitGrantedDesc, limitUsedDesc, limit429Desc, limitDeferredDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c LimitsCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	kinds := func(d *prometheus.Desc, name string, l pace.Limit, zeroToo bool) {
		for _, k := range []struct {
			kind string
			v    float64
		}{{"requests_per_minute", l.RequestsPerMinute}, {"tokens_per_minute", l.TokensPerMinute}, {"calls_in_flight", float64(l.CallsInFlight)}} {
			if k.v > 0 || zeroToo {
				gauge(d, k.v, name, k.kind)
			}
		}
	}
	for _, s := range c.Stats() {
		kinds(limitConfiguredDesc, s.Limit, s.Configured, false)
		kinds(limitLearnedDesc, s.Limit, s.Learned, false)
		kinds(limitEffectiveDesc, s.Limit, s.Effective, true)
		gauge(limitInFlightDesc, float64(s.CallsInFlight), s.Limit, "all")
		gauge(limitInFlightDesc, float64(s.LocalCallsInFlight), s.Limit, "process")
		gauge(limitReservedDesc, float64(s.ReservedTokens), s.Limit)
		gauge(limitWaitingDesc, float64(s.Waiting), s.Limit)
		counter(limitGrantedDesc, float64(s.Granted), s.Limit)
		counter(limitUsedDesc, float64(s.UsedTokens), s.Limit)
		counter(limit429Desc, float64(s.RateLimited), s.Limit)
		counter(limitDeferredDesc, float64(s.Deferred), s.Limit)
	}
}
