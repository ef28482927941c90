package telemetry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/telemetry"
)

type fakeStats struct {
	calls atomic.Int32
	err   error
}

func (f *fakeStats) JobStats(context.Context, *store.JobStatsParams) (*store.JobStats, error) {
	f.calls.Add(1)
	if f.err != nil {
		return nil, f.err
	}
	oldest := time.Now().Add(-90 * time.Second)
	return &store.JobStats{
		Active:            []store.JobStatusCount{{Status: store.JobStatusQueued, Pipeline: "invoice", Jobs: 7}},
		Claimable:         7,
		OldestClaimableAt: &oldest,
	}, nil
}

func (f *fakeStats) OutboxStats(context.Context, *store.OutboxStatsParams) (*store.OutboxStats, error) {
	unrouted := time.Now().Add(-10 * time.Second)
	return &store.OutboxStats{
		Unrouted:         3,
		OldestUnroutedAt: &unrouted,
		Pending:          []store.SinkPending{{Sink: "billing", Deliveries: 4, OldestAt: time.Now().Add(-time.Hour)}},
	}, nil
}

func TestStatsCollectorAsksTheStoreOncePerSecond(t *testing.T) {
	t.Parallel()
	st := &fakeStats{}
	m := telemetry.NewMetrics()
	c := telemetry.NewStatsCollector(st, nil)
	// A stopped clock, a second ahead of the fake store's own times (which
	// it takes from time.Now when asked): every scrape is within the second.
	now := time.Now().Add(time.Second)
	telemetry.SetStatsNow(c, func() time.Time { return now })
	m.Register(c)
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)

	for range 5 {
		body := get(t, srv.URL)
		require.Contains(t, body, `oncejob_jobs{pipeline="invoice",status="queued"} 7`)
		require.Contains(t, body, "oncejob_queue_depth 7")
		require.Contains(t, body, "oncejob_store_stats_up 1")
		require.Regexp(t, `oncejob_queue_oldest_age_seconds (8\d|9\d)\.`, body)
		require.Contains(t, body, "oncejob_outbox_unrouted 3")
		require.Contains(t, body, `oncejob_deliveries_pending{sink="billing"} 4`)
		require.Regexp(t, `oncejob_outbox_oldest_pending_age_seconds 360\d\.`, body, "the oldest of unrouted and pending")
	}
	require.EqualValues(t, 1, st.calls.Load(), "scrapes within a second share one question")
}

func TestStatsCollectorSaysWhenTheStoreDoesNotAnswer(t *testing.T) {
	t.Parallel()
	m := telemetry.NewMetrics()
	m.Register(telemetry.NewStatsCollector(&fakeStats{err: errors.New("store unavailable")}, nil))
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	body := get(t, srv.URL)
	require.Contains(t, body, "oncejob_store_stats_up 0")
	require.NotContains(t, body, "oncejob_queue_depth")
}

// TestWorkerObserverCountsAndTraces runs the observer as a worker would: a
// job taken over from a dead worker, one stage, one unknown outcome, a
// dead letter for its attempts budget.
func TestWorkerObserverCountsAndTraces(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})

	m := telemetry.NewMetrics()
	obs := &telemetry.WorkerObserver{Metrics: m, Provider: "llmsim"}
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	job := &store.Job{ID: "job-1", Pipeline: "invoice", Attempt: 2, ClaimedFrom: store.JobStatusRunning,
		Traceparent: traceparent, CreatedAt: time.Now().Add(-time.Minute), UpdatedAt: time.Now()}

	ctx, end := obs.JobStarted(context.Background(), job)
	sctx, endStage := obs.StageStarted(ctx, job, store.JobStageLLMDone, 0)
	_, endCall := obs.LLMCallStarted(sctx, job, "gpt-x")
	endCall(&store.LLMAttempt{Model: "gpt-x", Outcome: store.LLMOutcomeOutcomeUnknown, LatencyMillis: 1500, ProviderKey: "k"})
	endStage("computed", errors.New("outcome unknown"))
	end(store.JobStatusDeadLettered, "attempts")

	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	page := get(t, srv.URL)
	for _, name := range []string{"oncejob_lease_takeovers_total", "oncejob_llm_unknown_outcomes_total", "oncejob_dead_letters_total", "oncejob_llm_calls_total"} {
		require.InDelta(t, 1, sum(t, page, name), 0, name)
	}
	require.Contains(t, page, `oncejob_budget_exhaustions_total{budget="attempts",pipeline="invoice"} 1`)
	require.Contains(t, page, `oncejob_jobs_settled_total{pipeline="invoice",status="dead_lettered"} 1`)
	require.Contains(t, page, `oncejob_stage_duration_seconds_count{pipeline="invoice",result="error",source="computed",stage="llm_done"} 1`)
	require.Zero(t, sum(t, page, "oncejob_job_start_latency_seconds_count"), "a second attempt is not a start")
	require.Zero(t, sum(t, page, "oncejob_llm_tokens_total"), "nothing billed")

	spans := recorder.Ended()
	require.Len(t, spans, 4) // claim, llm, stage, attempt
	for _, s := range spans {
		require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", s.SpanContext().TraceID().String(), "span %s joins the submitter's trace", s.Name())
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = s
	}
	require.Equal(t, "00f067aa0ba902b7", byName["oncejob.job.attempt"].Parent().SpanID().String())
	require.Equal(t, byName["oncejob.job.attempt"].SpanContext().SpanID(), byName["oncejob.stage llm_done chunk 0"].Parent().SpanID())
	require.Equal(t, byName["oncejob.stage llm_done chunk 0"].SpanContext().SpanID(), byName["oncejob.llm gpt-x"].Parent().SpanID())
}

func TestTraceparentIsEmptyWithoutASampledSpan(t *testing.T) {
	t.Parallel()
	require.Empty(t, telemetry.Traceparent(context.Background()))
}

// sum adds the values of the series of family name on a /metrics page.
func sum(t *testing.T, page, name string) float64 {
	t.Helper()
	var total float64
	for _, line := range strings.Split(page, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		require.NoError(t, err, line)
		total += v
	}
	return total
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}
