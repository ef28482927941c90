package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/jobkey"
	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/worker"
)

type testBundle struct {
	store worker.Store
	sim   *llmsim.Running
}

func setup(t *testing.T, faults llmsim.Faults) *testBundle {
	t.Helper()
	sim, err := llmsim.Start("", llmsim.Config{Faults: faults})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	return &testBundle{store: storepgtest.NewTestStore(t), sim: sim}
}

// startWorker runs a worker until the test ends.
func (b *testBundle) startWorker(t *testing.T, reg *pipeline.Registry, llmTimeout time.Duration) *worker.Worker {
	t.Helper()
	w, _ := b.runWorker(t, reg, llmTimeout)
	return w
}

// runWorker runs a worker until stop is called or the test ends.
func (b *testBundle) runWorker(t *testing.T, reg *pipeline.Registry, llmTimeout time.Duration) (w *worker.Worker, stop func()) {
	t.Helper()
	if llmTimeout == 0 {
		llmTimeout = 10 * time.Second
	}
	provider, err := llm.NewOpenAI(llm.Config{BaseURL: b.sim.URL, Timeout: llmTimeout, LookupPath: llmsim.LookupPath})
	require.NoError(t, err)
	return b.runWorkerOn(t, reg, provider)
}

// runWorkerOn runs a worker on provider until stop is called or the test
// ends, its Claimed, Heartbeat and Settled signals on.
func (b *testBundle) runWorkerOn(t *testing.T, reg *pipeline.Registry, provider llm.Provider) (w *worker.Worker, stop func()) {
	t.Helper()
	return b.runWorkerWith(t, reg, provider, nil)
}

// runWorkerWith is runWorkerOn with the config changed by edit (when not
// nil), its provider-batch signals on too.
func (b *testBundle) runWorkerWith(t *testing.T, reg *pipeline.Registry, provider llm.Provider, edit func(*worker.Config)) (w *worker.Worker, stop func()) {
	t.Helper()
	cfg := worker.Config{
		Store:         b.store,
		Provider:      provider,
		Pipelines:     reg,
		Concurrency:   4,
		LeaseDuration: 5 * time.Second,
		PollInterval:  20 * time.Millisecond,
		Logger:        slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if edit != nil {
		edit(&cfg)
	}
	w, err := worker.New(cfg)
	require.NoError(t, err)
	w.TestSignals().Claimed.Init()
	w.TestSignals().Heartbeat.Init()
	w.TestSignals().Settled.Init()
	w.TestSignals().BatchJobsRead.Init()
	w.TestSignals().BatchCancelled.Init()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	stop = sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	return w, stop
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// registry builds pipelines on the built-in model profile.
func registry(t *testing.T, yaml string) *pipeline.Registry {
	t.Helper()
	r, err := pipeline.Parse([]byte("model_profiles:\n  default: {model: sim-1, prompt_micros_per_1k: 100, completion_micros_per_1k: 200}\npipelines:\n" + yaml))
	require.NoError(t, err)
	return r
}

const summarizeSchema = `{type: object, required: [summary], properties: {summary: {type: string}, key_points: {type: array, items: {type: string}}}}`

func summarize(version int, promptVersion, schema, extra string) string {
	return fmt.Sprintf(`  - name: summarize
    version: %d
    prompt: {version: "%s", template: "Summarize part {{.Chunk}} of {{.Chunks}}: {{.Text}}"}
    model_profiles: [default]
    output_schema: %s
%s`, version, promptVersion, schema, extra)
}

// submit inserts a job the way the server does.
func submit(t *testing.T, st store.Store, reg *pipeline.Registry, tenant, text string) *store.Job {
	t.Helper()
	p, ok := reg.Get("summarize")
	require.True(t, ok)
	docSHA := jobkey.DocumentSHA256([]byte(text))
	dedup, err := jobkey.DedupKey(jobkey.Computation{
		Tenant: tenant, DocumentSHA256: docSHA, MediaType: "text/plain", Pipeline: p.Name,
		PipelineVersion: p.Version, PromptVersion: p.Prompt.Version, ModelProfile: "default",
	})
	require.NoError(t, err)
	res, err := st.JobSubmit(context.Background(), &store.JobSubmitParams{
		ID: uuid.NewString(), Tenant: tenant, Method: "/oncejob.v1.JobService/SubmitJob",
		IdempotencyKey: uuid.NewString(), Fingerprint: "fp", DedupKey: dedup,
		Pipeline: p.Name, PipelineVersion: p.Version, PromptVersion: p.Prompt.Version, ModelProfile: "default",
		Document: []byte(text), DocumentSHA256: docSHA, DocumentMedia: "text/plain", Params: []byte(`{}`),
	})
	require.NoError(t, err)
	return res.Job
}

func waitTerminal(t *testing.T, st store.Store, job *store.Job) *store.Job {
	t.Helper()
	var got *store.Job
	require.Eventually(t, func() bool {
		var err error
		got, err = st.JobGetByID(context.Background(), &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
		require.NoError(t, err)
		return got.Status.Terminal()
	}, 90*time.Second, 20*time.Millisecond)
	return got
}

func events(t *testing.T, st store.Store, job *store.Job) []*store.JobEvent {
	t.Helper()
	evs, err := st.JobEventList(context.Background(), &store.JobEventListParams{Tenant: job.Tenant, JobID: job.ID})
	require.NoError(t, err)
	for i, e := range evs {
		require.EqualValues(t, i+1, e.Seq, "events are consecutive from 1")
	}
	return evs
}

func stagesOf(evs []*store.JobEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Status)+"/"+string(e.Stage))
	}
	return out
}

func TestJobRunsThroughEveryStage(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{})
	reg := registry(t, summarize(1, "1", summarizeSchema, ""))
	job := submit(t, b.store, reg, "acme", "Quarterly report. Revenue grew twelve percent on strong licence sales.")
	b.startWorker(t, reg, 0)

	got := waitTerminal(t, b.store, job)
	require.Equal(t, store.JobStatusSucceeded, got.Status, "error: %+v", got.Error)
	require.Equal(t, store.JobStagePublished, got.Stage)
	var out map[string]any
	require.NoError(t, json.Unmarshal(got.Output, &out))
	require.NotEmpty(t, out["summary"])
	require.EqualValues(t, 1, got.Usage.LLMCalls)
	require.Positive(t, got.Usage.PromptTokens)
	require.Positive(t, got.Usage.CostMicros)

	// Status transitions only: a stage-only advance appends no event.
	require.Equal(t, []string{
		"queued/uploaded", "running/uploaded", "succeeded/published",
	}, stagesOf(events(t, b.store, got)))
	// The one LLM answer is the one checkpoint: the deterministic stages
	// (text, chunks, merge, a validation without repair) write none.
	cps, err := b.store.CheckpointList(context.Background(), &store.CheckpointListParams{JobID: job.ID})
	require.NoError(t, err)
	require.Len(t, cps, 1)
	require.Equal(t, store.JobStageLLMDone, cps[0].Stage)
	require.EqualValues(t, 0, cps[0].Chunk)

	outbox, err := b.store.OutboxList(context.Background(), &store.OutboxListParams{JobID: job.ID})
	require.NoError(t, err)
	require.Len(t, outbox, 1)
	require.Equal(t, "job:"+job.ID+":job.succeeded:0", outbox[0].EventID)

	journal, err := b.store.LLMAttemptList(context.Background(), &store.LLMAttemptListParams{JobID: job.ID})
	require.NoError(t, err)
	require.Len(t, journal, 1)
	require.Equal(t, store.LLMOutcomeSucceeded, journal[0].Outcome)
	require.True(t, journal[0].Billed)
	require.NotEmpty(t, journal[0].ProviderRequestID)
	require.EqualValues(t, 1, b.sim.Stats().BilledCalls)
}

func TestLongDocumentIsChunked(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{})
	reg := registry(t, summarize(1, "1", summarizeSchema, "    chunking: {size: 100, overlap: 10}\n"))
	var words []string
	for i := range 60 {
		words = append(words, fmt.Sprintf("word%02d", i))
	}
	text := strings.Join(words, " ") // 419 characters, no two chunks alike
	job := submit(t, b.store, reg, "acme", text)
	b.startWorker(t, reg, 0)

	got := waitTerminal(t, b.store, job)
	require.Equal(t, store.JobStatusSucceeded, got.Status, "error: %+v", got.Error)
	cps, err := b.store.CheckpointList(context.Background(), &store.CheckpointListParams{JobID: job.ID})
	require.NoError(t, err)
	var chunkCheckpoints int
	for _, cp := range cps {
		if cp.Stage == store.JobStageLLMDone && cp.Chunk >= 0 {
			chunkCheckpoints++
		}
	}
	require.GreaterOrEqual(t, chunkCheckpoints, 4)
	st := b.sim.Stats()
	require.EqualValues(t, chunkCheckpoints, st.BilledCalls, "one call per chunk")
	for key, n := range st.CallsByKey {
		require.EqualValues(t, 1, n, "key %s billed once", key)
	}
}

func TestDecisionCacheRunsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{})
	const text = "Board minutes: the board approved the budget and a new hiring plan."

	v1 := registry(t, summarize(1, "1", summarizeSchema, ""))
	first := submit(t, b.store, v1, "acme", text)
	// Each version's worker is stopped before the next starts, as a
	// finished deploy leaves it: a mixed fleet is
	// TestWorkerLeavesJobsOfAnotherPipelineVersion's subject.
	_, stop := b.runWorker(t, v1, 0)
	require.Equal(t, store.JobStatusSucceeded, waitTerminal(t, b.store, first).Status)
	require.EqualValues(t, 1, b.sim.Stats().BilledCalls)

	// A new validator (schema) version in pipeline version 2: a new dedup key,
	// but only validation runs again.
	v2 := registry(t, summarize(2, "1", `{type: object, required: [summary, key_points]}`, ""))
	second := submit(t, b.store, v2, "acme", text)
	require.NotEqual(t, first.DedupKey, second.DedupKey)
	stop()
	_, stop = b.runWorker(t, v2, 0)
	got := waitTerminal(t, b.store, second)
	require.Equal(t, store.JobStatusSucceeded, got.Status, "error: %+v", got.Error)
	require.EqualValues(t, 1, b.sim.Stats().BilledCalls, "no second generation")
	// The chunk's LLM answer is reused and its checkpoint names the first
	// job; text, chunks, the merge and validation are computed again, for
	// nothing, and write no checkpoint.
	cps, err := b.store.CheckpointList(context.Background(), &store.CheckpointListParams{JobID: second.ID})
	require.NoError(t, err)
	reusedFrom := map[string]string{}
	for _, cp := range cps {
		reusedFrom[fmt.Sprintf("%s/%d", cp.Stage, cp.Chunk)] = cp.ReusedFrom
	}
	require.Equal(t, map[string]string{"llm_done/0": first.ID}, reusedFrom)
	// The first job's journal names the model of its one call.
	attempts, err := b.store.LLMAttemptList(context.Background(), &store.LLMAttemptListParams{JobID: first.ID})
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	require.Equal(t, "sim-1", attempts[0].Model)

	// A new prompt version: a new computation, billed.
	v3 := registry(t, summarize(3, "2", summarizeSchema, ""))
	third := submit(t, b.store, v3, "acme", text)
	stop()
	b.startWorker(t, v3, 0)
	require.Equal(t, store.JobStatusSucceeded, waitTerminal(t, b.store, third).Status)
	require.EqualValues(t, 2, b.sim.Stats().BilledCalls)
}

func TestSameComputationIsPaidForOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{})
	reg := registry(t, summarize(1, "1", summarizeSchema, ""))
	const text = "Two clients submitted this same document at the same moment."
	jobs := []*store.Job{submit(t, b.store, reg, "acme", text), submit(t, b.store, reg, "acme", text), submit(t, b.store, reg, "acme", text)}
	b.startWorker(t, reg, 0)

	var computed, deduplicated int
	var calls int64
	for _, j := range jobs {
		got := waitTerminal(t, b.store, j)
		require.Equal(t, store.JobStatusSucceeded, got.Status)
		calls += int64(got.Usage.LLMCalls)
		if got.DeduplicatedFrom == "" {
			computed++
		} else {
			deduplicated++
		}
	}
	require.Equal(t, 1, computed, "at most one computed success per dedup key")
	require.Equal(t, 2, deduplicated)
	// Jobs claimed together may each call before one publishes (their
	// provider keys differ); whatever was billed is in their usage.
	require.EqualValues(t, calls, b.sim.Stats().BilledCalls)
}

func TestRateLimitStormHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	const retryAfter = 300 * time.Millisecond
	b := setup(t, llmsim.Faults{RateLimit: &llmsim.RateLimit{Trigger: llmsim.Trigger{Count: 3}, RetryAfter: llmsim.Duration(retryAfter)}})
	reg := registry(t, summarize(1, "1", summarizeSchema, "    retry: {max_attempts: 6, initial_backoff: 1ms, max_backoff: 5ms, deadline: 1m}\n"))
	job := submit(t, b.store, reg, "acme", "Rate limited document.")
	// The calls' times are taken where they arrive, in front of the
	// simulator: a call comes at least Retry-After after the 429 before it
	// was answered, whatever the store's writes cost in between.
	arrivals, url := callTimes(t, b.sim.URL)
	provider, err := llm.NewOpenAI(llm.Config{BaseURL: url, Timeout: 10 * time.Second, LookupPath: llmsim.LookupPath})
	require.NoError(t, err)
	b.runWorkerOn(t, reg, provider)

	got := waitTerminal(t, b.store, job)
	require.Equal(t, store.JobStatusSucceeded, got.Status, "error: %+v", got.Error)
	require.EqualValues(t, 1, got.Attempt, "a 429 spends no attempt: the call waits its turn again in the same one")
	journal, err := b.store.LLMAttemptList(context.Background(), &store.LLMAttemptListParams{JobID: job.ID})
	require.NoError(t, err)
	require.Len(t, journal, 4)
	for i := range 3 {
		require.Equal(t, store.LLMOutcomeRateLimited, journal[i].Outcome)
		require.False(t, journal[i].Billed)
	}
	require.Equal(t, store.LLMOutcomeSucceeded, journal[3].Outcome)
	require.EqualValues(t, 1, b.sim.Stats().BilledCalls)
	calls := arrivals()
	require.Len(t, calls, 4, "three 429s and the call answered")
	for i := 1; i < len(calls); i++ {
		require.GreaterOrEqual(t, calls[i].Sub(calls[i-1]), retryAfter, "retry %d came before Retry-After", i)
	}
}

// callTimes puts a recorder in front of the provider at base: the URL to
// call instead, and the arrival times of the chat completions it passed.
func callTimes(t *testing.T, base string) (arrivals func() []time.Time, url string) {
	t.Helper()
	target, err := neturl.Parse(base)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(&neturl.URL{Scheme: target.Scheme, Host: target.Host})
	var mu sync.Mutex
	var times []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			mu.Lock()
			times = append(times, time.Now())
			mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(times)
	}, srv.URL + strings.TrimPrefix(base, target.Scheme+"://"+target.Host)
}

func TestUnavailableProviderDeadLettersAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{Unavailable: &llmsim.Unavailable{Trigger: llmsim.Trigger{Count: 1000}}})
	reg := registry(t, summarize(1, "1", summarizeSchema, "    retry: {max_attempts: 3, initial_backoff: 1ms, max_backoff: 5ms}\n"))
	job := submit(t, b.store, reg, "acme", "Poison document.")
	b.startWorker(t, reg, 0)

	got := waitTerminal(t, b.store, job)
	require.Equal(t, store.JobStatusDeadLettered, got.Status)
	require.EqualValues(t, 3, got.Attempt)
	require.Equal(t, "BUDGET_SPENT", got.Error.Code)
	require.Contains(t, got.Error.Message, "attempts spent: 3 of 3")
	require.Zero(t, b.sim.Stats().BilledCalls)
	require.Equal(t, []string{"job.dead_lettered"}, outboxTypes(t, b.store, job.ID), "no effect, only the dead letter")
}

// outboxTypes lists the event types of a job's outbox, oldest first.
func outboxTypes(t *testing.T, st store.EngineStore, jobID string) []string {
	t.Helper()
	outbox, err := st.OutboxList(context.Background(), &store.OutboxListParams{JobID: jobID})
	require.NoError(t, err)
	types := make([]string, len(outbox))
	for i, e := range outbox {
		types[i] = e.EventType
	}
	return types
}

func TestTimeoutAfterBillingIsOutcomeUnknownAndRetriedWithTheSameKey(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{BillThenTimeout: &llmsim.BillThenTimeout{Trigger: llmsim.Trigger{Count: 1}, Delay: llmsim.Duration(2 * time.Second)}})
	reg := registry(t, summarize(1, "1", summarizeSchema, "    retry: {initial_backoff: 1ms, max_backoff: 5ms}\n"))
	job := submit(t, b.store, reg, "acme", "Billed but the client gave up.")
	b.startWorker(t, reg, 300*time.Millisecond)

	got := waitTerminal(t, b.store, job)
	require.Equal(t, store.JobStatusSucceeded, got.Status, "error: %+v", got.Error)
	journal, err := b.store.LLMAttemptList(context.Background(), &store.LLMAttemptListParams{JobID: job.ID})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(journal), 2)
	require.Equal(t, store.LLMOutcomeOutcomeUnknown, journal[0].Outcome, "a timeout after sending is never a failure")
	last := journal[len(journal)-1]
	require.Equal(t, store.LLMOutcomeSucceeded, last.Outcome)
	require.Equal(t, journal[0].ProviderKey, last.ProviderKey)
	require.True(t, last.Billed, "the provider's one bill is counted once, on the attempt that got the answer")
	require.EqualValues(t, 1, got.Usage.LLMCalls)
	st := b.sim.Stats()
	require.EqualValues(t, 1, st.BilledCalls, "the retry is answered by lookup (or the provider's idempotency store), never billed again")
}

func TestUnsupportedMediaTypeFails(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{})
	reg := registry(t, summarize(1, "1", summarizeSchema, ""))
	p, _ := reg.Get("summarize")
	docSHA := jobkey.DocumentSHA256([]byte("%PDF-1.7"))
	res, err := b.store.JobSubmit(context.Background(), &store.JobSubmitParams{
		ID: uuid.NewString(), Tenant: "acme", Method: "m", IdempotencyKey: "k", Fingerprint: "f", DedupKey: "d",
		Pipeline: p.Name, PipelineVersion: 1, PromptVersion: "1", ModelProfile: "default",
		Document: []byte("%PDF-1.7"), DocumentSHA256: docSHA, DocumentMedia: "application/pdf", Params: []byte(`{}`),
	})
	require.NoError(t, err)
	b.startWorker(t, reg, 0)
	got := waitTerminal(t, b.store, res.Job)
	require.Equal(t, store.JobStatusFailed, got.Status)
	require.Equal(t, "UNSUPPORTED_MEDIA_TYPE", got.Error.Code)
	require.False(t, got.Error.Retryable)
	require.Zero(t, b.sim.Stats().BilledCalls)
}

// TestDueTimesRunOnTheInjectedClock: a retry's due time is the worker's
// clock plus the backoff. With an hour of backoff on a clock two hours
// behind, the retry is due at once; on the real clock the job would wait
// up to an hour.
func TestDueTimesRunOnTheInjectedClock(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{Unavailable: &llmsim.Unavailable{Trigger: llmsim.Trigger{Count: 1}}})
	reg := registry(t, summarize(1, "1", summarizeSchema, "    retry: {initial_backoff: 1h, max_backoff: 1h, deadline: 48h}\n"))
	job := submit(t, b.store, reg, "acme", "A document the provider first refuses.")
	provider, err := llm.NewOpenAI(llm.Config{BaseURL: b.sim.URL, LookupPath: llmsim.LookupPath})
	require.NoError(t, err)
	w, err := worker.New(worker.Config{
		Store: b.store, Provider: provider, Pipelines: reg, PollInterval: 20 * time.Millisecond,
		Now: func() time.Time { return time.Now().Add(-2 * time.Hour) },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	got := waitTerminal(t, b.store, job)
	require.Equal(t, store.JobStatusSucceeded, got.Status, "error: %+v", got.Error)
	var retried bool
	for _, e := range events(t, b.store, got) {
		retried = retried || e.Status == store.JobStatusRetryWait
	}
	require.True(t, retried, "the first call failed and was retried")
}
