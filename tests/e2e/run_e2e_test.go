package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// runSummary is `oncejob run submit --json`'s summary.
type runSummary struct {
	RunID        string   `json:"run_id"`
	Lines        int      `json:"lines"`
	Created      int      `json:"created"`
	AlreadyInRun int      `json:"already_in_run"`
	AlreadyDone  int      `json:"already_done"`
	Reused       int      `json:"reused"`
	Invalid      int      `json:"invalid"`
	Refused      int      `json:"refused"`
	Errors       []string `json:"errors"`
	State        string   `json:"state"`
	Progress     struct {
		Items        int64 `json:"items,string"`
		Succeeded    int64 `json:"succeeded,string"`
		DeadLettered int64 `json:"deadLettered,string"`
		Reused       int64 `json:"reused,string"`
		Computed     int64 `json:"computed,string"`
		Complete     bool  `json:"complete"`
	} `json:"progress"`
}

// lastSummary parses the last line of a `run submit --json` output.
func lastSummary(t *testing.T, out string) runSummary {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var s runSummary
	for i := len(lines) - 1; i >= 0; i-- {
		if json.Unmarshal([]byte(lines[i]), &s) == nil && s.RunID != "" {
			return s
		}
	}
	t.Fatalf("no summary in:\n%s", out)
	return s
}

// writeItems writes n items, "document <prefix>-<i>", one per line.
func writeItems(t *testing.T, name, prefix string, n int, extra ...string) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"text": "document %s-%d", "labels": {"n": "%d"}}`+"\n", prefix, i, i)
	}
	for _, e := range extra {
		b.WriteString(e + "\n")
	}
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path
}

// lightPipelines: one short chunk, one LLM call per item.
const lightPipelines = `
pipelines:
  - name: light
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object, required: [summary], properties: {summary: {type: string}}}
    retry: {max_attempts: 20, initial_backoff: 10ms, max_backoff: 200ms, deadline: 10m}
`

// TestRunItemsThroughKills is the run of the README on Postgres with the
// simulator in a process of its own: the CLI submits 2,000 items (10,000
// under -e2e.big, the README's size) into a run, in batches of 100; the
// server is SIGKILLed once while items are submitted and run (at a third),
// and the CLI is SIGKILLed at about 60 % of the submission; both are
// started again with the same commands. Every item SUCCEEDED, the
// simulator billed exactly one call per item (none twice), and no item was
// created as new work twice. Then a second run of the same items plus 100
// new ones computes the 100 and reuses the others without a call more. At
// 2,000 items the kills still land mid-submission, with 7 and 12 batches
// behind them and 13 and 8 ahead, and mid-run: what the size adds is time.
func TestRunItemsThroughKills(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the run through kills takes about a minute")
	}
	n := sized(2000, 10000)
	dbURL := storepgtest.NewMigratedSchemaURL(t)
	sim := startSim(t)
	pipes := writeFile(t, "pipelines.yaml", lightPipelines)
	addr := freeAddr(t)
	serveArgs := []string{
		"serve", "--database-url", dbURL, "--migrate", "--grpc-addr", addr, "--pipelines", pipes,
		"--llm-base-url", sim.base + "/v1", "--llm-lookup-path", llmsim.LookupPath,
		"--workers", "16", "--lease-duration", "2s", "--poll-interval", "20ms", "--relays", "0",
	}
	server := start(t, "serve-1", nil, serveArgs...)
	waitHealthy(t, server, addr)
	db, err := storepg.Open(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(db.Close)

	items := writeItems(t, "items.jsonl", "a", n)
	cliArgs := []string{"run", "submit", items, "--run", "nightly", "--pipeline", "light", "--batch", "100", "--wait", "--json", "--addr", addr}
	cli := start(t, "cli-1", nil, cliArgs...)

	// The run's id, from the store: the CLI made it before its first item.
	var runID string
	require.Eventually(t, func() bool {
		res, err := db.RunList(context.Background(), &store.RunListParams{Tenant: "default"})
		require.NoError(t, err)
		if len(res.Runs) == 1 {
			runID = res.Runs[0].ID
		}
		return runID != ""
	}, 30*time.Second, 20*time.Millisecond)
	progress := func() store.RunProgress {
		r, err := db.RunGet(context.Background(), &store.RunGetParams{Tenant: "default", ID: runID})
		require.NoError(t, err)
		return r.Progress
	}
	// Polls another process's progress: a signal of this one cannot reach it.
	waitItems := func(what string, cond func(store.RunProgress) bool) {
		t.Helper()
		for !cond(progress()) {
			require.False(t, cli.done(), "the CLI ended before %s:\n%s", what, cli.logs)
			time.Sleep(20 * time.Millisecond)
		}
	}

	waitItems("a third was submitted", func(p store.RunProgress) bool { return p.Items >= int64(n/3) })
	server.signal(syscall.SIGKILL)
	<-server.exited
	t.Logf("server SIGKILLed at %d items submitted, %d succeeded", progress().Items, progress().ByStatus[store.JobStatusSucceeded])
	server = start(t, "serve-2", nil, serveArgs...)
	waitHealthy(t, server, addr)

	waitItems("60 % was submitted", func(p store.RunProgress) bool { return p.Items >= int64(n*6/10) })
	cli.signal(syscall.SIGKILL)
	<-cli.exited
	killedAt := progress()
	t.Logf("CLI SIGKILLed at %d items submitted, %d succeeded", killedAt.Items, killedAt.ByStatus[store.JobStatusSucceeded])
	require.Less(t, killedAt.Items, int64(n), "the CLI was killed before it submitted everything")

	again := start(t, "cli-2", nil, cliArgs...)
	select {
	case <-again.exited:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the run did not finish:\n%s", again.logs)
	}
	require.NoError(t, again.err, "the CLI started again finishes the run:\n%s", again.logs)
	sum := lastSummary(t, again.logs.String())
	require.Equal(t, runID, sum.RunID, "the same command is the same run")
	require.Equal(t, n, sum.Lines)
	require.Equal(t, n, sum.Created+sum.AlreadyInRun, "every item new or already in the run")
	require.GreaterOrEqual(t, int64(sum.AlreadyInRun), killedAt.Items, "what the first CLI submitted is answered from the run")
	require.Positive(t, sum.AlreadyDone, "the summary says how many were already done")
	require.Zero(t, sum.Reused)
	require.EqualValues(t, n, sum.Progress.Succeeded)
	require.True(t, sum.Progress.Complete)

	final := progress()
	require.EqualValues(t, n, final.Items)
	require.EqualValues(t, n, final.ByStatus[store.JobStatusSucceeded])
	require.Zero(t, final.Reused)
	requireOneJobPerItem(t, dbURL, n)
	st := sim.stats(t)
	require.EqualValues(t, n, st.BilledCalls, "one billed call per item")
	for key, calls := range st.CallsByKey {
		require.EqualValues(t, 1, calls, "provider key %s billed once", key)
	}

	// A second run over the same items and 100 new ones: 100 computed,
	// the n reused, 100 calls more.
	more := writeItems(t, "more.jsonl", "b", 100)
	both := filepath.Join(t.TempDir(), "both.jsonl")
	a, err := os.ReadFile(items)
	require.NoError(t, err)
	b, err := os.ReadFile(more)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(both, append(a, b...), 0o600))
	second := start(t, "cli-3", nil, "run", "submit", both, "--run", "nightly-2", "--pipeline", "light", "--wait", "--json", "--addr", addr)
	select {
	case <-second.exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the second run did not finish:\n%s", second.logs)
	}
	require.NoError(t, second.err, "%s", second.logs)
	sum2 := lastSummary(t, second.logs.String())
	require.NotEqual(t, runID, sum2.RunID)
	require.Equal(t, 100, sum2.Created)
	require.Equal(t, n, sum2.Reused)
	require.EqualValues(t, n+100, sum2.Progress.Items)
	require.EqualValues(t, n+100, sum2.Progress.Succeeded)
	require.EqualValues(t, n, sum2.Progress.Reused, "the run's counts say how many were reused")
	require.EqualValues(t, 100, sum2.Progress.Computed)
	requireOneJobPerItem(t, dbURL, n+100)
	require.EqualValues(t, n+100, sim.stats(t).BilledCalls, "no extra bill for the reused items")
}

// requireOneJobPerItem checks that the schema holds exactly n jobs, one
// per computation: no item was created as new work twice.
func requireOneJobPerItem(t *testing.T, dbURL string, n int) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var jobs, computations, keys int
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT count(*), count(DISTINCT dedup_key), count(DISTINCT idempotency_key) FROM jobs`).Scan(&jobs, &computations, &keys))
	require.Equal(t, n, jobs, "jobs")
	require.Equal(t, n, computations, "one job per computation")
	require.Equal(t, n, keys, "one job per key")
}
