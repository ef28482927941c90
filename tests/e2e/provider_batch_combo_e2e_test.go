package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/llm"
)

// The provider-batch findings of issue #30: combinations of faults that
// each held alone (docs/architecture.md, "Provider batches").

// TestProviderBatchRetriedLineGoesIntoANewBatch: a one-item run whose line
// fails (a 500 line) or expires once is sent again in a batch of another
// name and succeeds, billed once, on both stores. When a batch's name was
// the hash of its calls' keys alone, the retry found the old batch and read
// the same failed line back until the job was dead-lettered.
func TestProviderBatchRetriedLineGoesIntoANewBatch(t *testing.T) {
	t.Parallel()
	faults := map[string]string{
		"failed":  `{"batch_line_fail":{"count":1}}`,
		"expired": `{"batch_expire":{"count":1,"completed":0}}`,
	}
	for _, store := range []string{"postgres", "sqlite"} {
		for name, fault := range faults {
			t.Run(store+"/"+name, func(t *testing.T) {
				t.Parallel()
				sim, _ := batchSim(t, 300*time.Millisecond)
				sim.setFaults(t, fault)
				s := startBatchServer(t, store == "sqlite", sim, "200ms", nil)
				t.Cleanup(s.proc.stop)
				sum := submitRun(t, s, writeItems(t, "items.jsonl", "one-"+name, 1), "one")
				require.EqualValues(t, 1, sum.Progress.Succeeded, "%+v", sum)
				require.Zero(t, sum.Progress.DeadLettered)
				st := sim.stats(t)
				require.EqualValues(t, 2, st.BatchesCreated, "the line again, in a second batch")
				require.EqualValues(t, 1, st.BatchBilledCalls)
				require.Len(t, st.BatchCallsByKey, 1)
				require.Zero(t, st.BilledCalls)
			})
		}
	}
}

// TestProviderBatchCancelAfterRestart: a server restarted (SIGTERM, as in a
// deploy) while its batches are in progress; the run is cancelled right
// after the restart, while most jobs are still queued (the restarted server
// runs 3 workers: those claimed wait on their resumed batch, the others
// never will): every batch is cancelled at the provider and nothing is
// billed. A batch picked up again used to count none of the jobs waiting
// on it, and then only those that left it cancelled: a batch with a job
// cancelled while still queued was never cancelled (CI at d6a0199) and
// billed every line. Batches no job of which was claimed again are found
// by the sweep (--provider-batch-sweep).
func TestProviderBatchCancelAfterRestart(t *testing.T) {
	t.Parallel()
	const n = 20
	sim, _ := batchSim(t, time.Hour)
	s := startBatchServer(t, false, sim, "200ms", nil, "--provider-batch-sweep", "200ms")
	items := writeItems(t, "items.jsonl", "cr", n)
	stdout, stderr, code := runCLI(t, "run", "submit", items, "--run", "to-cancel", "--pipeline", "light", "--model-profile", "batched", "--json", "--addr", s.addr)
	require.Zero(t, code, stderr)
	runID := lastSummary(t, stdout).RunID
	require.Eventually(t, func() bool { return sentCalls(s.proc) == n }, 60*time.Second, 20*time.Millisecond, "every call sent")
	created := sim.stats(t).BatchesCreated
	conn, err := pgx.Connect(t.Context(), s.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.Eventually(t, func() bool {
		var recorded int64
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM provider_batches`).Scan(&recorded))
		return recorded == created
	}, 30*time.Second, 20*time.Millisecond, "every batch recorded (what the sweep finds)")

	// Restarted with 3 workers: the jobs claimed again hold them, waiting on
	// their batches, so the others are still queued at the cancel.
	const workers = 3
	s.proc.stop()
	s.args = append(s.args, "--workers", strconv.Itoa(workers))
	s.restart()
	var unclaimed int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM jobs WHERE status <> 'running'`).Scan(&unclaimed))
	require.GreaterOrEqual(t, unclaimed, n-workers)
	_, stderr, code = runCLI(t, "run", "cancel", runID, "--addr", s.addr)
	require.Zero(t, code, stderr)
	t.Logf("jobs not claimed again just before the cancel: %d of %d", unclaimed, n)
	require.Eventually(t, func() bool { return sim.stats(t).BatchesCancelled == created }, 60*time.Second, 20*time.Millisecond, "every batch cancelled at the provider")
	st := sim.stats(t)
	require.Equal(t, created, st.BatchesCreated, "no batch sent after the cancel")
	require.Zero(t, st.BatchBilledCalls)
	require.Zero(t, st.BilledCalls)
}

// sentLine is the batcher's log line of a batch it created.
var sentLine = regexp.MustCompile(`"msg":"provider batch sent".*"calls":(\d+)`)

// sentCalls counts the calls in the batches p's log says it created.
func sentCalls(p *proc) int {
	var calls int
	for _, m := range sentLine.FindAllStringSubmatch(p.logs.String(), -1) {
		c, _ := strconv.Atoi(m[1])
		calls += c
	}
	return calls
}

// TestProviderBatchStalledIntentsThenRestart: server 1 stops (SIGSTOP) while
// it journals its batch's intent rows; server 2 takes the jobs over and
// sends them in batches of its own; server 1 wakes and goes on journaling
// intents for a moment (it checks its jobs' contexts, not yet the leases);
// server 2 is restarted (SIGTERM, then the same command) before its batches
// are answered. Every call is billed once. The resumed attempt used to
// follow the journal's last intent in row order, server 1's late one,
// naming a batch that was never created, and sent the call again while
// server 2's batch billed it too (301-305 bills for 300 calls).
func TestProviderBatchStalledIntentsThenRestart(t *testing.T) {
	t.Parallel()
	const n, stopAt = 300, 50
	sim, client := batchSim(t, 25*time.Second)
	s := startBatchServer(t, false, sim, "1s", []string{fmt.Sprintf("ONCEJOB_FAILPOINTS=provider_batch_intent=stop@%d", stopAt)})
	stalled := s.proc
	t.Cleanup(func() { stalled.signal(syscall.SIGCONT) })
	items := writeItems(t, "items.jsonl", "si", n)
	stdout, stderr, code := runCLI(t, "run", "submit", items, "--run", "stalled", "--pipeline", "light", "--model-profile", "batched", "--json", "--addr", s.addr)
	require.Zero(t, code, stderr)
	require.NotEmpty(t, lastSummary(t, stdout).RunID)
	require.Eventually(t, func() bool { return stopped(t, stalled) }, 60*time.Second, 20*time.Millisecond, "the failpoint stops the server")
	sentBefore := sentCalls(stalled)

	// Server 2 takes the jobs over: those with no intent of server 1 at
	// once, the others after looking twice for the batch their intent
	// names. Server 1 wakes once server 2 has sent the first ones (and
	// well within the 30 s its intent writes may take).
	conn, err := pgx.Connect(t.Context(), s.dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	taker := s.second(t, "serve-2")
	require.Eventually(t, func() bool { return sentBefore+sentCalls(taker) >= n-(stopAt-1) }, 60*time.Second, 50*time.Millisecond, "server 2 sends the calls with no intent")
	lateBefore := lateIntents(t, conn)
	stalled.signal(syscall.SIGCONT)
	require.Eventually(t, func() bool { return strings.Contains(stalled.logs.String(), "provider batch not sent") }, 60*time.Second, 20*time.Millisecond, "server 1 finds its jobs taken over")
	late := lateIntents(t, conn) - lateBefore
	t.Logf("intents server 1 journaled after server 2's: %d", late)

	// Server 2 restarted before its batches are answered (25 s each).
	taker.stop()
	s.proc = s.second(t, "serve-2b")
	sum := submitRun(t, s, items, "stalled")
	require.EqualValues(t, n, sum.Progress.Succeeded, "%+v", sum)

	stalled.stop()
	s.proc.stop()
	waitAllBatches(t, sim, client)
	st := sim.stats(t)
	require.Zero(t, st.BilledCalls, "no call went online")
	require.Len(t, st.BatchCallsByKey, n)
	for key, c := range st.BatchCallsByKey {
		require.EqualValues(t, 1, c, "%s billed once", key)
	}
	require.EqualValues(t, n, st.BatchBilledCalls)
	require.Zero(t, late, "a taken-over attempt journals no intent")
}

// lateIntents counts the intent rows written by an attempt after a later
// attempt of the same job had journaled one for the same call.
func lateIntents(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var late int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM llm_attempts stale
		WHERE stale.error LIKE 'provider batch %' AND EXISTS (
			SELECT 1 FROM llm_attempts newer WHERE newer.job_id = stale.job_id AND newer.provider_key = stale.provider_key
				AND newer.error LIKE 'provider batch %' AND newer.job_attempt > stale.job_attempt AND newer.id < stale.id)`).Scan(&late))
	return late
}

// TestProviderBatchOrphanBillIsVisible: a batch at the provider that bills
// a call of a run a second time, and that no job waits for (as the batch of
// a taker restarted was, in the double bill above), is followed to its end
// by the sweep (--provider-batch-sweep) and its bill recorded: the run's
// batches count 6 billed lines for 5 calls, the simulator 2 bills for that
// key, while the journal's accounting still says 5 calls.
func TestProviderBatchOrphanBillIsVisible(t *testing.T) {
	t.Parallel()
	const n = 5
	sim, client := batchSim(t, 300*time.Millisecond)
	s := startBatchServer(t, false, sim, "200ms", nil, "--provider-batch-sweep", "200ms")
	t.Cleanup(s.proc.stop)
	sum := submitRun(t, s, writeItems(t, "items.jsonl", "orphan", n), "orphan")
	require.EqualValues(t, n, sum.Progress.Succeeded, "%+v", sum)
	runs, _ := runClients(t, s.addr)
	billedLines := func() int64 {
		list, err := runs.ListRunBatches(t.Context(), &oncejobv1.ListRunBatchesRequest{RunId: sum.RunID})
		require.NoError(t, err)
		var billed int64
		for _, b := range list.GetBatches() {
			billed += b.GetBilledLines()
		}
		return billed
	}
	require.EqualValues(t, n, billedLines(), "each call billed once")

	// The orphan: one of the run's calls in a batch of its own, its intent
	// and its record as a batcher that died after the create leaves them.
	conn, err := pgx.Connect(t.Context(), s.dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	var intentID int64
	var key string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT id, provider_key FROM llm_attempts WHERE error LIKE 'provider batch %' ORDER BY id LIMIT 1`).Scan(&intentID, &key))
	const tag = "oncejob-orphan"
	orphan, err := llm.EnsureBatch(t.Context(), client, tag, time.Now().Add(-time.Hour),
		[]*llm.Request{{Model: "sim-1", Messages: []llm.Message{{Role: "user", Content: "Summarize: again"}}, ProviderKey: key}}, nil, llm.EnsureHooks{})
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), `INSERT INTO llm_attempts (job_id, tenant, job_attempt, stage, chunk, provider_key, outcome, billed,
			prompt_tokens, completion_tokens, cost_micros, latency_ms, provider_request_id, error, model, price_class)
		SELECT job_id, tenant, job_attempt + 1, stage, chunk, provider_key, outcome, false, 0, 0, 0, 0, '', $2, model, price_class
		FROM llm_attempts WHERE id = $1`, intentID, "provider batch "+tag)
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), `INSERT INTO provider_batches (tag, batch_id, status, created_at, updated_at)
		VALUES ($1, $2, 'validating', now(), now() - interval '1 hour')`, tag, orphan.ID)
	require.NoError(t, err)

	require.Eventually(t, func() bool { return billedLines() == n+1 }, 60*time.Second, 100*time.Millisecond, "the sweep follows the orphan and records its bill")
	require.Contains(t, s.proc.logs.String(), "provider batch adopted")
	st := sim.stats(t)
	require.EqualValues(t, 2, st.BatchCallsByKey[key], "the provider billed the call twice")
	require.EqualValues(t, n+1, st.BatchBilledCalls)
	run, err := runs.GetRun(t.Context(), &oncejobv1.GetRunRequest{RunId: sum.RunID})
	require.NoError(t, err)
	require.EqualValues(t, n, run.GetRun().GetProgress().GetUsage().GetLlmCalls(), "the journal applied one answer per call")
}

// second starts another server on s's database with s's arguments on an
// address of its own, unarmed, and makes it the one s's clients call.
func (s *batchServer) second(t *testing.T, name string) *proc {
	t.Helper()
	s.addr = freeAddr(t)
	args := append([]string(nil), s.args...)
	for i, a := range args {
		if a == "--grpc-addr" {
			args[i+1] = s.addr
		}
	}
	s.args = args
	p := start(t, name, nil, args...)
	t.Cleanup(p.stop)
	waitHealthy(t, p, s.addr)
	return p
}

// waitAllBatches waits until every batch the simulator created has
// finished: then it has billed every line it will.
func waitAllBatches(t *testing.T, sim *simProc, client *llm.OpenAIClient) {
	t.Helper()
	for i := int64(1); i <= sim.stats(t).BatchesCreated; i++ {
		id := fmt.Sprintf("batch_sim%06d", i)
		require.Eventually(t, func() bool {
			b, err := client.GetBatch(t.Context(), id)
			return err == nil && b.Finished()
		}, 120*time.Second, 50*time.Millisecond, "%s finishes", id)
	}
}
