package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// batchSim is `oncejob llm-sim --batch-delay delay` in a process of its own.
func batchSim(t *testing.T, delay time.Duration) (*simProc, *llm.OpenAIClient) {
	t.Helper()
	addr := freeAddr(t)
	p := start(t, "llm-sim", nil, "llm-sim", "--addr", addr, "--batch-delay", delay.String())
	t.Cleanup(p.stop)
	s := &simProc{proc: p, base: "http://" + addr}
	require.Eventually(t, func() bool {
		resp, err := http.Get(s.base + "/v1/oncejob/stats")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(transport.CloseIdleConnections)
	client, err := llm.NewOpenAI(llm.Config{BaseURL: s.base + "/v1", Batches: true, Timeout: 10 * time.Second, HTTPClient: &http.Client{Transport: transport}})
	require.NoError(t, err)
	return s, client
}

func batchRequests(prefix string, n int) []*llm.Request {
	calls := make([]*llm.Request, n)
	for i := range calls {
		calls[i] = &llm.Request{
			Model:       "sim-1",
			Messages:    []llm.Message{{Role: "user", Content: fmt.Sprintf("Summarise.\n\nItem %d of %s, worth %d.", i, prefix, i*11)}},
			ProviderKey: fmt.Sprintf("%s:%03d", prefix, i),
		}
	}
	return calls
}

// waitFinished polls the batch until it has finished, requiring its statuses
// to move only forwards.
func waitFinished(t *testing.T, client *llm.OpenAIClient, id string) *llm.Batch {
	t.Helper()
	order := map[string]int{llm.BatchValidating: 0, llm.BatchInProgress: 1, llm.BatchFinalizing: 2, llm.BatchCompleted: 3, llm.BatchExpired: 3, llm.BatchFailed: 3}
	last := -1
	var b *llm.Batch
	require.Eventually(t, func() bool {
		var err error
		b, err = client.GetBatch(t.Context(), id)
		require.NoError(t, err)
		rank, ok := order[b.Status]
		require.True(t, ok, "unexpected status %s", b.Status)
		require.GreaterOrEqual(t, rank, last, "status went back to %s", b.Status)
		last = rank
		return b.Finished()
	}, 30*time.Second, 20*time.Millisecond)
	return b
}

// TestProviderBatchSimulatorProcess: the simulator as an external process
// serves the Batch API over --batch-delay. A lost answer to create, found
// again by the tag; a tenth of the lines failed and retried in a second
// batch: every call billed once at the batch price, none online.
func TestProviderBatchSimulatorProcess(t *testing.T) {
	t.Parallel()
	sim, client := batchSim(t, 300*time.Millisecond)
	sim.setFaults(t, `{"batch_create_lost":{"count":1},"batch_line_fail":{"every":10}}`)
	since := time.Now().Add(-time.Minute)
	calls := batchRequests("e2e", 60)

	_, err := llm.EnsureBatch(t.Context(), client, "e2e-1", since, calls, nil, llm.EnsureHooks{})
	class, _ := llm.ClassOf(err)
	require.Equal(t, llm.ClassOutcomeUnknown, class, "the answer to create was lost: %v", err)
	first, err := llm.EnsureBatch(t.Context(), client, "e2e-1", since, calls, nil, llm.EnsureHooks{})
	require.NoError(t, err)
	first = waitFinished(t, client, first.ID)
	require.Equal(t, llm.BatchCompleted, first.Status)
	results, err := client.BatchResults(t.Context(), first)
	require.NoError(t, err)
	byKey := map[string]*llm.Request{}
	for _, c := range calls {
		byKey[c.ProviderKey] = c
	}
	var retry []*llm.Request
	for _, r := range results {
		require.Contains(t, byKey, r.CustomID)
		if r.Err != nil {
			require.True(t, llm.Retryable(r.Err.Class), "%v", r.Err)
			retry = append(retry, byKey[r.CustomID])
		}
	}
	require.Len(t, results, 60)
	require.Len(t, retry, 6)

	sim.setFaults(t, `{}`)
	second, err := llm.EnsureBatch(t.Context(), client, "e2e-2", since, retry, nil, llm.EnsureHooks{})
	require.NoError(t, err)
	second = waitFinished(t, client, second.ID)
	require.Equal(t, 6, second.Completed)

	st := sim.stats(t)
	require.EqualValues(t, 2, st.BatchesCreated)
	require.EqualValues(t, 2, st.FilesUploaded)
	require.EqualValues(t, 60, st.BatchBilledCalls)
	require.Zero(t, st.BilledCalls)
	for _, c := range calls {
		require.EqualValues(t, 1, st.BatchCallsByKey[c.ProviderKey], "%s billed once", c.ProviderKey)
	}
}

// TestProviderBatchSimulatorCancel: a cancelled batch in progress ends
// cancelled and bills nothing.
func TestProviderBatchSimulatorCancel(t *testing.T) {
	t.Parallel()
	sim, client := batchSim(t, time.Hour)
	b, err := llm.EnsureBatch(t.Context(), client, "e2e-cancel", time.Now().Add(-time.Minute), batchRequests("cancel", 5), nil, llm.EnsureHooks{})
	require.NoError(t, err)
	got, err := client.CancelBatch(t.Context(), b.ID)
	require.NoError(t, err)
	require.Equal(t, llm.BatchCancelling, got.Status)
	got = waitFinishedOrCancelled(t, client, b.ID)
	require.Equal(t, llm.BatchCancelled, got.Status)
	st := sim.stats(t)
	require.EqualValues(t, 1, st.BatchesCancelled)
	require.Zero(t, st.BatchBilledCalls)

	_, errOut, code := cli{t: t}.run("", "llm-sim", "--batch-delay", "-1s")
	require.NotZero(t, code)
	require.True(t, strings.Contains(errOut, "--batch-delay"), errOut)
}

func waitFinishedOrCancelled(t *testing.T, client *llm.OpenAIClient, id string) *llm.Batch {
	t.Helper()
	var b *llm.Batch
	require.Eventually(t, func() bool {
		var err error
		b, err = client.GetBatch(t.Context(), id)
		require.NoError(t, err)
		return b.Finished()
	}, 30*time.Second, 20*time.Millisecond)
	return b
}

// batchPipelines: one LLM call per item, through provider batches of at
// most 100 calls; a batch closes when full or after the linger.
func batchPipelines(linger string) string {
	return `
model_profiles:
  batched:
    model: sim-1
    prompt_micros_per_1k: 1000
    completion_micros_per_1k: 2000
    provider_batch: {max_calls: 100, linger: ` + linger + `}
pipelines:
  - name: light
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [batched]
    output_schema: {type: object, required: [summary], properties: {summary: {type: string}}}
    retry: {max_attempts: 20, initial_backoff: 10ms, max_backoff: 200ms, deadline: 10m}
`
}

// batchServer is serve on Postgres or the embedded store, its provider the
// simulator process, started again with the same arguments after a kill.
type batchServer struct {
	t     *testing.T
	addr  string
	args  []string
	proc  *proc
	dbURL string // empty on the embedded store
	// restarts counts the starts after a death.
	restarts int
}

func startBatchServer(t *testing.T, embedded bool, sim *simProc, linger string, env []string, extraArgs ...string) *batchServer {
	t.Helper()
	addr := freeAddr(t)
	args := []string{"serve", "--grpc-addr", addr, "--pipelines", writeFile(t, "pipelines.yaml", batchPipelines(linger)),
		"--llm-base-url", sim.base + "/v1", "--llm-batch-api",
		"--lease-duration", "2s", "--poll-interval", "20ms", "--relays", "0"}
	args = append(args, extraArgs...)
	s := &batchServer{t: t, addr: addr}
	if embedded {
		args = append(args, "--data-dir", t.TempDir())
	} else {
		s.dbURL = storepgtest.NewMigratedSchemaURL(t)
		args = append(args, "--database-url", s.dbURL, "--migrate")
	}
	s.args = args
	s.proc = start(t, "serve-1", env, args...)
	waitHealthy(t, s.proc, addr)
	return s
}

// restart starts the server again with the same command, unarmed.
func (s *batchServer) restart() {
	s.t.Helper()
	s.restarts++
	s.proc = start(s.t, fmt.Sprint("serve-", s.restarts+1), nil, s.args...)
	t := s.t
	t.Cleanup(s.proc.stop)
	waitHealthy(t, s.proc, s.addr)
}

// submitRun runs `oncejob run submit --wait` of items until it ends in
// success, started again with the same command when the server died under
// it.
func submitRun(t *testing.T, s *batchServer, items, run string) runSummary {
	t.Helper()
	args := []string{"run", "submit", items, "--run", run, "--pipeline", "light", "--model-profile", "batched", "--wait", "--json", "--addr", s.addr}
	for try := 1; ; try++ {
		stdout, stderr, code := runCLI(t, args...)
		if code == 0 {
			return lastSummary(t, stdout)
		}
		require.False(t, try >= 3 && !s.proc.done(), "run submit failed with the server up:\n%s\n%s", stdout, stderr)
		if s.proc.done() {
			s.restart()
		}
		require.Less(t, try, 5, "run submit keeps failing:\n%s", stderr)
	}
}

// TestProviderBatchThroughKills: 300 items in batches of 100, the server
// SIGKILLed at each provider-batch failpoint and started again with the same
// command, on Postgres and the embedded store: every item SUCCEEDED, each
// call billed once at the batch price and none online, three batches
// created (never one twice). The same items in a new run make no call.
func TestProviderBatchThroughKills(t *testing.T) {
	t.Parallel()
	const n = 300
	for _, store := range []string{"postgres", "sqlite"} {
		for _, fp := range []string{"provider_batch_after_upload=kill", "provider_batch_after_create=kill", "provider_batch_applying=kill@150"} {
			t.Run(store+"/"+fp, func(t *testing.T) {
				t.Parallel()
				sim, _ := batchSim(t, 500*time.Millisecond)
				s := startBatchServer(t, store == "sqlite", sim, "30s", []string{"ONCEJOB_FAILPOINTS=" + fp})
				items := writeItems(t, "items.jsonl", "b", n)
				sum := submitRun(t, s, items, "batched")
				require.Equal(t, 1, s.restarts, "the armed server died once and was started again")
				require.EqualValues(t, n, sum.Progress.Succeeded, "%+v", sum)
				require.True(t, sum.Progress.Complete)

				st := sim.stats(t)
				require.Zero(t, st.BilledCalls, "no call went online")
				require.EqualValues(t, n, st.BatchBilledCalls)
				// 300 calls in batches of 100; a member whose lease ran out
				// before its batch was sent (a loaded machine) is left out
				// and sent in a later batch, so more batches are no
				// second bill: the counts by key below say that.
				require.GreaterOrEqual(t, st.BatchesCreated, int64(3), "300 calls in batches of 100")
				require.Len(t, st.BatchCallsByKey, n)
				for key, c := range st.BatchCallsByKey {
					require.EqualValues(t, 1, c, "%s billed once", key)
				}

				again := submitRun(t, s, items, "batched-again")
				require.EqualValues(t, n, again.Reused)
				after := sim.stats(t)
				require.Equal(t, st.BatchesCreated, after.BatchesCreated, "the same items again: no batch")
				require.Equal(t, st.BatchBilledCalls, after.BatchBilledCalls)
				require.Zero(t, after.BilledCalls)
			})
		}
	}
}

// TestProviderBatchFailedAndExpiredLines: a tenth of the lines fail and the
// first batch expires with half its lines done; those calls go into later
// batches and each call is billed once, all within the job's budget.
func TestProviderBatchFailedAndExpiredLines(t *testing.T) {
	t.Parallel()
	const n = 300
	sim, _ := batchSim(t, 300*time.Millisecond)
	sim.setFaults(t, `{"batch_line_fail":{"every":10},"batch_expire":{"count":1,"completed":0.5}}`)
	s := startBatchServer(t, false, sim, "1s", nil)
	t.Cleanup(s.proc.stop)
	sum := submitRun(t, s, writeItems(t, "items.jsonl", "f", n), "faulty")
	require.EqualValues(t, n, sum.Progress.Succeeded, "%+v", sum)
	require.Zero(t, sum.Progress.DeadLettered)
	st := sim.stats(t)
	require.Zero(t, st.BilledCalls)
	require.EqualValues(t, n, st.BatchBilledCalls, "failed and expired lines were billed nothing, their retries once")
	require.EqualValues(t, 1, st.BatchesExpired)
	require.Greater(t, st.BatchesCreated, int64(3), "the failed lines went into more batches")
	for key, c := range st.BatchCallsByKey {
		require.EqualValues(t, 1, c, "%s billed once", key)
	}

	// The journal: every bill at the batch price (half of 1000 and 2000
	// micros per 1,000 tokens), labelled so.
	conn, err := pgx.Connect(t.Context(), s.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var batch, other, mispriced int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT
		count(*) FILTER (WHERE billed AND price_class = 'batch'),
		count(*) FILTER (WHERE billed AND price_class <> 'batch'),
		count(*) FILTER (WHERE billed AND cost_micros <> (prompt_tokens * 1000 + completion_tokens * 2000) / 1000 * 50 / 100)
		FROM llm_attempts`).Scan(&batch, &other, &mispriced))
	require.Equal(t, n, batch)
	require.Zero(t, other)
	require.Zero(t, mispriced)
}

// TestProviderBatchCancelRun: cancelling the run while its batch is in
// progress cancels the batch at the provider, and nothing is billed.
func TestProviderBatchCancelRun(t *testing.T) {
	t.Parallel()
	sim, _ := batchSim(t, time.Hour)
	s := startBatchServer(t, false, sim, "200ms", nil)
	t.Cleanup(s.proc.stop)
	items := writeItems(t, "items.jsonl", "c", 20)
	stdout, stderr, code := runCLI(t, "run", "submit", items, "--run", "to-cancel", "--pipeline", "light", "--model-profile", "batched", "--json", "--addr", s.addr)
	require.Zero(t, code, stderr)
	runID := lastSummary(t, stdout).RunID
	require.Eventually(t, func() bool { return sim.stats(t).BatchesCreated >= 1 }, 30*time.Second, 20*time.Millisecond)
	_, stderr, code = runCLI(t, "run", "cancel", runID, "--addr", s.addr)
	require.Zero(t, code, stderr)
	// Every batch created is cancelled: those in flight when the run was
	// cancelled are cancelled once created.
	require.Eventually(t, func() bool {
		st := sim.stats(t)
		return st.BatchesCancelled == st.BatchesCreated
	}, 30*time.Second, 20*time.Millisecond)
	require.Zero(t, sim.stats(t).BatchBilledCalls)
	require.Zero(t, sim.stats(t).BilledCalls)
}

// TestProviderBatchRefusedWithoutBatchAPI: a profile with provider_batch on
// a provider not said to have the batch API stops serve at start, saying
// why.
func TestProviderBatchRefusedWithoutBatchAPI(t *testing.T) {
	t.Parallel()
	// An HTTP address of its own: serve's default, 7071, may be taken by
	// another test's or program's server on this machine.
	_, stderr, code := runCLI(t, "serve", "--data-dir", t.TempDir(), "--grpc-addr", freeAddr(t), "--http-addr", freeAddr(t),
		"--pipelines", writeFile(t, "pipelines.yaml", batchPipelines("1s")), "--llm-base-url", "http://127.0.0.1:9/v1")
	require.NotZero(t, code)
	require.Contains(t, stderr, `model profile "batched" has provider_batch`)
	require.Contains(t, stderr, "no batch API")
}
