package e2e

import (
	"net/http"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// TestMetricsScrapedDuringKill scrapes /metrics of real processes while a
// worker is SIGKILLed at a failpoint and another takes its jobs over under
// a provider whose answers come too late: the survivor counts the lease
// takeovers and the unknown outcomes, a serve process shows the queue the
// dead worker left, every job still ends once, and no metric carries a
// tenant or a job id.
func TestMetricsScrapedDuringKill(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	jobs := c.submit(t, 6)

	// A serve process with no workers, for the store's view of the queue.
	httpAddr := freeAddr(t)
	api := start(t, "serve-metrics", nil, "serve", "--database-url", c.dbURL, "--workers", "0", "--relays", "0",
		"--grpc-addr", freeAddr(t), "--http-addr", httpAddr, "--pipelines", c.pipes)

	// Worker A dies at its first LLM answer; the jobs it claimed stay
	// running under leases (1s) nobody renews.
	a := start(t, "worker-a", []string{"ONCEJOB_FAILPOINTS=after_llm_response=kill"}, workerArgs(c.dbURL, c.sim, c.pipes, "--workers", "4")...)
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("worker A never reached the failpoint")
	}
	require.Contains(t, a.logs.String(), "failpoint: after_llm_response")

	// The dead worker's jobs are claimable once its leases expire: the
	// store's gauges say so.
	var served map[string]*dto.MetricFamily
	require.Eventually(t, func() bool {
		served = scrape(t, "http://"+httpAddr+"/metrics")
		return served != nil && gauge(served, "oncejob_queue_depth") >= 4 && gauge(served, "oncejob_queue_oldest_age_seconds") > 0
	}, 30*time.Second, 50*time.Millisecond, "serve's /metrics never showed the abandoned jobs as claimable")
	require.Positive(t, sumByLabel(served, "oncejob_jobs", "status", "running"), "the abandoned jobs are still running in the store")
	require.EqualValues(t, 1, gauge(served, "oncejob_store_stats_up"))

	// The provider now bills calls and holds their answers past worker B's
	// client timeout: unknown outcomes, which B retries under the same
	// provider keys (the pipeline's on_unknown: retry).
	c.sim.setFaults(t, `{"bill_then_timeout": {"count": 3, "delay": "3s"}}`)
	metricsAddr := freeAddr(t)
	b := start(t, "worker-b", nil, workerArgs(c.dbURL, c.sim, c.pipes, "--workers", "4", "--llm-timeout", "500ms", "--metrics-addr", metricsAddr)...)
	// A job is terminal in the store when its publish commits; the worker
	// counts it settled just after, so the scrape waits for that too.
	var fams map[string]*dto.MetricFamily
	require.Eventually(t, func() bool {
		fams = scrape(t, "http://"+metricsAddr+"/metrics")
		return fams != nil && c.allTerminal(t, jobs) &&
			counter(fams, "oncejob_lease_takeovers_total") >= 1 &&
			counter(fams, "oncejob_llm_unknown_outcomes_total") >= 1 &&
			sumByLabel(fams, "oncejob_jobs_settled_total", "status", "succeeded") >= 1
	}, 90*time.Second, 100*time.Millisecond, "worker B's /metrics never showed takeovers and unknown outcomes with every job done")
	b.stop()

	t.Logf("takeovers %v, unknown outcomes %v, settled %v", counter(fams, "oncejob_lease_takeovers_total"),
		counter(fams, "oncejob_llm_unknown_outcomes_total"), counter(fams, "oncejob_jobs_settled_total"))
	require.Equal(t, counter(fams, "oncejob_llm_unknown_outcomes_total"),
		sumByLabel(fams, "oncejob_llm_calls_total", "outcome", "outcome_unknown"), "every unknown outcome is a journaled call")
	require.Positive(t, sumByLabel(fams, "oncejob_jobs_settled_total", "status", "succeeded"))
	require.Positive(t, counter(fams, "oncejob_llm_tokens_total"))
	require.Positive(t, histogramCount(fams, "oncejob_stage_duration_seconds"))
	c.requireExactlyOnce(t, jobs)

	// No tenant and no job id in any label, in either process.
	requireBoundedLabels(t, fams, jobs)
	requireBoundedLabels(t, scrape(t, "http://"+httpAddr+"/metrics"), jobs)
	api.stop()
}

// scrape reads a /metrics page; nil when nothing answers yet.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// counter sums a counter family over its label values.
func counter(fams map[string]*dto.MetricFamily, name string) float64 {
	var sum float64
	for _, m := range fams[name].GetMetric() {
		sum += m.GetCounter().GetValue()
	}
	return sum
}

// gauge sums a gauge family over its label values.
func gauge(fams map[string]*dto.MetricFamily, name string) float64 {
	var sum float64
	for _, m := range fams[name].GetMetric() {
		sum += m.GetGauge().GetValue()
	}
	return sum
}

func histogramCount(fams map[string]*dto.MetricFamily, name string) uint64 {
	var n uint64
	for _, m := range fams[name].GetMetric() {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

// sumByLabel sums the series of a counter or gauge family whose label has
// value.
func sumByLabel(fams map[string]*dto.MetricFamily, name, label, value string) float64 {
	var sum float64
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// requireBoundedLabels fails on a label that names a tenant or a job, or
// whose value is a job id, idempotency key or the tenant: series without
// bound.
func requireBoundedLabels(t *testing.T, fams map[string]*dto.MetricFamily, jobs []*oncejobv1.Job) {
	t.Helper()
	require.NotEmpty(t, fams)
	forbiddenNames := []string{"tenant", "tenant_id", "job", "job_id", "idempotency_key", "provider_key", "event_id"}
	forbiddenValues := []string{"default"} // the dev-mode tenant
	for _, j := range jobs {
		for _, v := range []string{j.GetId(), j.GetIdempotencyKey()} {
			if v != "" {
				forbiddenValues = append(forbiddenValues, v)
			}
		}
	}
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				require.NotContains(t, forbiddenNames, l.GetName(), "metric %s has label %s", name, l.GetName())
				if l.GetName() == "limit" {
					continue // a provider limit's name from the pipelines file (the default profile's is "default"), bounded by the config
				}
				require.False(t, slices.Contains(forbiddenValues, l.GetValue()), "metric %s label %s=%q names a tenant or a job", name, l.GetName(), l.GetValue())
			}
		}
	}
}

// TestRelayServesMetrics: with no relay running, serve's /metrics shows the
// events waiting and how long the oldest has; `oncejob relay --metrics-addr`
// then counts each delivery by sink and outcome and measures the outbox's
// lag, the backlog drops to nothing, and no label holds a tenant or a job.
func TestRelayServesMetrics(t *testing.T) {
	t.Parallel()
	e := newEffects(t)
	config := e.config(t, "")
	ids := e.announce(t, 5)
	httpAddr := freeAddr(t)
	api := start(t, "serve-metrics", nil, "serve", "--database-url", e.dbURL, "--workers", "0", "--relays", "0",
		"--grpc-addr", freeAddr(t), "--http-addr", httpAddr, "--config", config)
	var served map[string]*dto.MetricFamily
	require.Eventually(t, func() bool {
		served = scrape(t, "http://"+httpAddr+"/metrics")
		return served != nil
	}, 30*time.Second, 50*time.Millisecond)
	require.EqualValues(t, 2*len(ids), gauge(served, "oncejob_outbox_unrouted"), "no relay runs: every event waits")
	require.Positive(t, gauge(served, "oncejob_outbox_oldest_pending_age_seconds"))

	metricsAddr := freeAddr(t)
	r := start(t, "relay", nil, relayArgs(e.dbURL, config, "--metrics-addr", metricsAddr)...)
	require.Eventually(t, func() bool { return e.allDelivered(t, 2*len(ids)) }, 60*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		served = scrape(t, "http://"+httpAddr+"/metrics")
		return gauge(served, "oncejob_outbox_unrouted") == 0 && gauge(served, "oncejob_deliveries_pending") == 0 &&
			gauge(served, "oncejob_outbox_oldest_pending_age_seconds") == 0
	}, 60*time.Second, 100*time.Millisecond, "the backlog never emptied on serve's /metrics")
	api.stop()
	fams := scrape(t, "http://"+metricsAddr+"/metrics")
	require.NotNil(t, fams)
	require.GreaterOrEqual(t, sumByLabel(fams, "oncejob_deliveries_total", "outcome", "delivered"), float64(2*len(ids)))
	require.GreaterOrEqual(t, histogramCount(fams, "oncejob_outbox_lag_seconds"), uint64(2*len(ids)))
	var jobs []*oncejobv1.Job
	for _, id := range ids {
		jobs = append(jobs, &oncejobv1.Job{Id: id})
	}
	requireBoundedLabels(t, fams, jobs)
	r.stop()
}
