package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/worker"
)

func operator(t *testing.T, st worker.Store) store.OperatorStore {
	t.Helper()
	ops, ok := st.(store.OperatorStore)
	require.True(t, ok, "the store implements OperatorStore")
	return ops
}

func TestDeadLetteredJobReplaysFromItsLastCheckpoint(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{Unavailable: &llmsim.Unavailable{Trigger: llmsim.Trigger{Count: 3}}})
	reg := registry(t, summarize(1, "1", summarizeSchema, "    retry: {max_attempts: 3, initial_backoff: 1ms, max_backoff: 5ms}\n"))
	job := submit(t, b.store, reg, "acme", "A document the provider refuses three times.")
	b.startWorker(t, reg, 0)

	dead := waitTerminal(t, b.store, job)
	require.Equal(t, store.JobStatusDeadLettered, dead.Status)
	require.Equal(t, store.JobStageChunksReady, dead.Stage, "the stages before the LLM call finished")
	before := len(events(t, b.store, dead))

	res, err := operator(t, b.store).JobReplay(context.Background(), &store.JobReplayParams{Tenant: "acme", ID: job.ID, Message: "provider is back"})
	require.NoError(t, err)
	require.Equal(t, store.JobStatusQueued, res.Job.Status)

	got := waitTerminal(t, b.store, job)
	require.Equal(t, store.JobStatusSucceeded, got.Status, "error: %+v", got.Error)
	var stagesAfterReplay []string
	for _, e := range events(t, b.store, got)[before:] {
		stagesAfterReplay = append(stagesAfterReplay, string(e.Status)+"/"+string(e.Stage))
	}
	// Status transitions only (stage-only advances append no event); the
	// replay started from the stage the job's row kept, and the one bill
	// below says no LLM call was made twice.
	require.Equal(t, []string{
		"queued/chunks_ready", "running/chunks_ready", "succeeded/published",
	}, stagesAfterReplay)
	require.EqualValues(t, 1, b.sim.Stats().BilledCalls)
}

// countingLookups is a provider whose Lookup calls are counted.
type countingLookups struct {
	llm.Provider
	lookups atomic.Int64
}

func (c *countingLookups) Lookup(ctx context.Context, key string) (*llm.Response, error) {
	c.lookups.Add(1)
	return c.Provider.Lookup(ctx, key)
}

// TestReconcilePolicyResolvesByLookupWithoutASecondBill: an unknown outcome
// under on_unknown: reconcile parks the job with a due time, because the
// provider declares it can look calls up; the reconciler's claim asks once
// by key, and settling the unknown outcome asked nothing (it once made a
// live Lookup to find out whether the provider could: two lookups).
func TestReconcilePolicyResolvesByLookupWithoutASecondBill(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{BillThenTimeout: &llmsim.BillThenTimeout{Trigger: llmsim.Trigger{Count: 1}, Delay: llmsim.Duration(2 * time.Second)}})
	reg := registry(t, summarize(1, "1", summarizeSchema, "    on_unknown: reconcile\n    retry: {initial_backoff: 200ms, max_backoff: 300ms}\n"))
	job := submit(t, b.store, reg, "acme", "A batch document whose answer got lost.")
	client, err := llm.NewOpenAI(llm.Config{BaseURL: b.sim.URL, Timeout: 300 * time.Millisecond, LookupPath: llmsim.LookupPath})
	require.NoError(t, err)
	provider := &countingLookups{Provider: client}
	w, _ := b.runWorkerOn(t, reg, provider)

	_, err = w.TestSignals().Settled.WaitFor(func(s worker.SettledSignal) bool {
		return s.JobID == job.ID && s.Status == store.JobStatusOutcomeUnknown
	})
	require.NoError(t, err, "the job passed through OUTCOME_UNKNOWN")

	got := waitTerminal(t, b.store, job)
	require.EqualValues(t, 1, provider.lookups.Load(), "one lookup: the reconciler's, by key")
	require.Equal(t, store.JobStatusSucceeded, got.Status, "error: %+v", got.Error)
	st := b.sim.Stats()
	require.EqualValues(t, 1, st.BilledCalls, "resolved by lookup, not by a second call")
	require.EqualValues(t, 1, st.Requests, "the reconciler asked by key; it sent no new generation")
	journal, err := b.store.LLMAttemptList(context.Background(), &store.LLMAttemptListParams{JobID: job.ID})
	require.NoError(t, err)
	require.Len(t, journal, 2)
	require.Equal(t, store.LLMOutcomeOutcomeUnknown, journal[0].Outcome)
	require.Equal(t, store.LLMOutcomeSucceeded, journal[1].Outcome)
	require.True(t, journal[1].Billed, "the one bill is counted once")
}

// TestUnknownOutcomeWithoutLookupWaitsForResolveJob: a provider that
// declares it cannot look calls up (no LookupPath) leaves an unknown
// outcome under on_unknown: reconcile in OUTCOME_UNKNOWN with no next try,
// for ResolveJob; nobody asks it anything (settling once called Lookup to
// find that out) and nothing is called again.
func TestUnknownOutcomeWithoutLookupWaitsForResolveJob(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{BillThenTimeout: &llmsim.BillThenTimeout{Trigger: llmsim.Trigger{Count: 1}, Delay: llmsim.Duration(2 * time.Second)}})
	reg := registry(t, summarize(1, "1", summarizeSchema, "    on_unknown: reconcile\n    retry: {initial_backoff: 1ms, max_backoff: 5ms}\n"))
	job := submit(t, b.store, reg, "acme", "An answer lost at a provider with no lookup.")
	client, err := llm.NewOpenAI(llm.Config{BaseURL: b.sim.URL, Timeout: 300 * time.Millisecond})
	require.NoError(t, err)
	provider := &countingLookups{Provider: client}
	w, stop := b.runWorkerOn(t, reg, provider)

	_, err = w.TestSignals().Settled.WaitFor(func(s worker.SettledSignal) bool { return s.JobID == job.ID })
	require.NoError(t, err)
	stop()
	got, err := b.store.JobGetByID(context.Background(), &store.JobGetByIDParams{Tenant: "acme", ID: job.ID})
	require.NoError(t, err)
	require.Equal(t, store.JobStatusOutcomeUnknown, got.Status)
	require.Nil(t, got.RunAfter, "no next try: only ResolveJob settles it")
	require.Zero(t, provider.lookups.Load(), "the provider was never asked")
	require.EqualValues(t, 1, b.sim.Stats().Requests, "and nothing was called again")
}

func TestApprovalHoldsTheEffect(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{})
	reg := registry(t, summarize(1, "1", summarizeSchema, "    require_approval: true\n"))
	job := submit(t, b.store, reg, "acme", "Send this summary to every customer.")
	b.startWorker(t, reg, 0)

	var waiting *store.Job
	require.Eventually(t, func() bool {
		var err error
		waiting, err = b.store.JobGetByID(context.Background(), &store.JobGetByIDParams{Tenant: "acme", ID: job.ID})
		require.NoError(t, err)
		return waiting.Status == store.JobStatusAwaitingApproval
	}, 20*time.Second, 10*time.Millisecond)
	require.NotEmpty(t, waiting.Output, "the planned output is visible")
	require.Equal(t, []string{"job.awaiting_approval"}, outboxTypes(t, b.store, job.ID), "no effect before approval, only the request for it")

	_, err := operator(t, b.store).JobApprove(context.Background(), &store.JobApproveParams{Tenant: "acme", ID: job.ID, Approve: true})
	require.NoError(t, err)
	got := waitTerminal(t, b.store, job)
	require.Equal(t, store.JobStatusSucceeded, got.Status)
	require.JSONEq(t, string(waiting.Output), string(got.Output), "the approved output is what is published")
	require.EqualValues(t, 1, b.sim.Stats().BilledCalls)
}

func TestCancelDuringASlowCall(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{Latency: llmsim.Duration(5 * time.Second)})
	reg := registry(t, summarize(1, "1", summarizeSchema, ""))
	job := submit(t, b.store, reg, "acme", "A slow document.")
	w := b.startWorker(t, reg, 0)

	claimed, err := w.TestSignals().Claimed.Wait()
	require.NoError(t, err)
	require.Equal(t, []string{job.ID}, claimed)
	require.Eventually(t, func() bool { return b.sim.Stats().Requests == 1 }, 20*time.Second, 5*time.Millisecond, "the call is in flight")
	_, err = operator(t, b.store).JobCancel(context.Background(), &store.JobCancelParams{Tenant: "acme", ID: job.ID, Message: "changed my mind"})
	require.NoError(t, err)
	// The request reaches the worker through its next heartbeat.
	_, err = w.TestSignals().Heartbeat.WaitFor(func(h worker.HeartbeatSignal) bool { return h.JobID == job.ID && h.CancelRequested })
	require.NoError(t, err)

	got := waitTerminal(t, b.store, job)
	require.Equal(t, store.JobStatusCancelled, got.Status)
	journal, err := b.store.LLMAttemptList(context.Background(), &store.LLMAttemptListParams{JobID: job.ID})
	require.NoError(t, err)
	require.Len(t, journal, 1)
	require.Equal(t, store.LLMOutcomeCancelled, journal[0].Outcome, "the call in flight was cancelled, not waited out")
	for _, e := range events(t, b.store, got) {
		require.NotContains(t, []store.JobStage{store.JobStageLLMDone, store.JobStageValidated, store.JobStagePublished}, e.Stage, "no later stage ran")
	}
	require.Equal(t, []string{"job.cancelled"}, outboxTypes(t, b.store, job.ID), "no effect, only the cancellation")
}

// An approval releases a job whose attempts are all spent on the work before
// it: publishing the approved plan is not a new attempt at the work.
func TestApprovalDoesNotNeedAttemptsLeft(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{})
	reg := registry(t, summarize(1, "1", summarizeSchema, "    require_approval: true\n    retry: {max_attempts: 1}\n"))
	job := submit(t, b.store, reg, "acme", "Approve me with no attempts left.")
	b.startWorker(t, reg, 0)
	require.Eventually(t, func() bool {
		j, err := b.store.JobGetByID(context.Background(), &store.JobGetByIDParams{Tenant: "acme", ID: job.ID})
		require.NoError(t, err)
		return j.Status == store.JobStatusAwaitingApproval
	}, 20*time.Second, 10*time.Millisecond)
	_, err := operator(t, b.store).JobApprove(context.Background(), &store.JobApproveParams{Tenant: "acme", ID: job.ID, Approve: true})
	require.NoError(t, err)
	got := waitTerminal(t, b.store, job)
	require.Equal(t, store.JobStatusSucceeded, got.Status, "error: %+v", got.Error)
}

// A worker that runs another version of the job's pipeline leaves the job
// for one that runs its version, instead of publishing another computation
// under the job's dedup key.
func TestWorkerLeavesJobsOfAnotherPipelineVersion(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{})
	v1 := registry(t, summarize(1, "1", summarizeSchema, "    retry: {max_attempts: 2, initial_backoff: 1ms, max_backoff: 100ms, deadline: 2s}\n"))
	v2 := registry(t, summarize(2, "1", summarizeSchema, "    retry: {max_attempts: 2, initial_backoff: 1ms, max_backoff: 100ms, deadline: 2s}\n"))
	job := submit(t, b.store, v1, "acme", "Submitted under version 1.")
	b.startWorker(t, v2, 0)
	// Claims of another version are not tries: the attempts budget (2)
	// never ends the job; its deadline does.
	got := waitTerminal(t, b.store, job)
	require.Equal(t, store.JobStatusDeadLettered, got.Status)
	require.Contains(t, got.Error.Message, "deadline")
	require.Contains(t, got.Error.Message, "the job needs summarize version 1")
	require.Greater(t, got.Attempt, int32(2), "claimed more often than the attempts budget")
	require.Zero(t, got.BudgetAttempts, "no claim spent an attempt")
	require.Zero(t, b.sim.Stats().BilledCalls)
}

// A worker that shuts down mid-call requeues its job at once and gives the
// attempt back: deploys must not spend a job's budget.
func TestShutdownRequeuesWithoutSpendingTheBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{Latency: llmsim.Duration(5 * time.Second)})
	reg := registry(t, summarize(1, "1", summarizeSchema, ""))
	job := submit(t, b.store, reg, "acme", "Interrupted by a deploy.")
	provider, err := llm.NewOpenAI(llm.Config{BaseURL: b.sim.URL, LookupPath: llmsim.LookupPath})
	require.NoError(t, err)
	w, err := worker.New(worker.Config{Store: b.store, Provider: provider, Pipelines: reg, PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	w.TestSignals().Claimed.Init()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()

	claimed, err := w.TestSignals().Claimed.Wait()
	require.NoError(t, err)
	require.Equal(t, []string{job.ID}, claimed)
	require.Eventually(t, func() bool { return b.sim.Stats().Requests == 1 }, 20*time.Second, 5*time.Millisecond, "the call is in flight")
	cancel()
	<-done

	got, err := b.store.JobGetByID(context.Background(), &store.JobGetByIDParams{Tenant: "acme", ID: job.ID})
	require.NoError(t, err)
	require.Equal(t, store.JobStatusRetryWait, got.Status)
	require.Zero(t, got.BudgetAttempts, "the interrupted attempt was given back")
	require.EqualValues(t, 1, got.Attempt)
}
