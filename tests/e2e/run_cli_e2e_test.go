package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// runCLI runs the oncejob binary to its end and returns its output and exit
// code.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "oncejob"), args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), errOut.String(), ee.ExitCode()
	}
	require.NoError(t, err)
	return out.String(), errOut.String(), 0
}

// runClients dials the server's run and job services.
func runClients(t *testing.T, addr string) (oncejobv1.RunServiceClient, oncejobv1.JobServiceClient) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return oncejobv1.NewRunServiceClient(conn), oncejobv1.NewJobServiceClient(conn)
}

// runJobs lists every job of a run.
func runJobs(t *testing.T, jobs oncejobv1.JobServiceClient, runID string) map[string]*oncejobv1.Job {
	t.Helper()
	out := map[string]*oncejobv1.Job{}
	req := &oncejobv1.ListJobsRequest{RunId: runID, PageSize: 500}
	for {
		resp, err := jobs.ListJobs(context.Background(), req)
		require.NoError(t, err)
		for _, j := range resp.GetJobs() {
			out[j.GetId()] = j
		}
		if resp.GetNextPageToken() == "" {
			return out
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

// TestRunSubmitItemsOfOnePageAndBadLines: on the embedded store, URLs that
// differ only in tracking parameters, fragment, host case, default port or
// query order are one item of work; a line that is not JSON and one that is
// no item are named by their line numbers, the others go in, and the exit
// status says something was wrong.
func TestRunSubmitItemsOfOnePageAndBadLines(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	server := start(t, "serve", nil, embeddedServeArgs(t.TempDir(), addr, nil, "")...)
	waitHealthy(t, server, addr)
	items := writeFile(t, "pages.jsonl", strings.Join([]string{
		`{"url": "https://Example.com:443/a?b=2&a=1&utm_source=news#top", "text": "page A"}`,
		`{"url": "https://example.com/a?a=1&b=2", "text": "page A"}`,
		`{"url": "HTTPS://EXAMPLE.COM/a?a=1&fbclid=xyz&b=2", "text": "page A"}`,
		`this line is not JSON`,
		`{"url": "https://example.com:443/a?b=2&gclid=1&a=1#reviews", "text": "page A"}`,
		`{"url": "https://example.com/b", "text": "page B"}`,
		`{"url": "https://example.com/c"}`,
		`{"url": "http://example.com:80/b?utm_campaign=x", "text": "page B over http"}`,
	}, "\n")+"\n")

	stdout, stderr, code := runCLI(t, "run", "submit", items, "--run", "pages", "--id-field", "url", "--wait", "--json", "--addr", addr)
	require.Equal(t, 1, code, "bad lines make the exit status non-zero:\n%s\n%s", stdout, stderr)
	require.Contains(t, stderr, "line 4: not a JSON object")
	require.Contains(t, stderr, `line 7: has no document`)
	sum := lastSummary(t, stdout)
	require.Equal(t, 2, sum.Invalid)
	require.Equal(t, 3, sum.Created, "page A once, page B over https, page B over http")
	require.Equal(t, 3, sum.Reused, "the three other spellings of page A")
	require.EqualValues(t, 3, sum.Progress.Items)
	require.EqualValues(t, 3, sum.Progress.Succeeded)

	runs, jobs := runClients(t, addr)
	got := runJobs(t, jobs, sum.RunID)
	require.Len(t, got, 3)

	// The same command again: nothing new, and it says so.
	stdout, _, code = runCLI(t, "run", "submit", items, "--run", "pages", "--id-field", "url", "--json", "--addr", addr)
	require.Equal(t, 1, code)
	again := lastSummary(t, stdout)
	require.Equal(t, sum.RunID, again.RunID)
	require.Zero(t, again.Created)
	require.Equal(t, 6, again.AlreadyInRun)
	require.Equal(t, 6, again.AlreadyDone)

	status, _, code := runCLI(t, "run", "status", sum.RunID, "--addr", addr)
	require.Zero(t, code)
	require.Contains(t, status, "succeeded 3")
	list, _, code := runCLI(t, "run", "list", "--addr", addr)
	require.Zero(t, code)
	require.Contains(t, list, sum.RunID)
	resp, err := runs.GetRun(context.Background(), &oncejobv1.GetRunRequest{RunId: sum.RunID})
	require.NoError(t, err)
	require.True(t, resp.GetRun().GetProgress().GetComplete())
}

// TestRunSubmitWaitWithNoItem: a file without a valid item (every line
// bad, or empty) and a file that is not there create no run - before issue
// 30 an empty OPEN run stayed in run list and the console - and --wait
// returns at once, saying so; bad lines and a missing file exit 1.
func TestRunSubmitWaitWithNoItem(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	server := start(t, "serve", nil, embeddedServeArgs(t.TempDir(), addr, nil, "")...)
	waitHealthy(t, server, addr)
	for _, c := range []struct {
		name, items string
		code        int
	}{
		{"every line bad", "not JSON\n{\"url\": \"https://example.com/no-text\"}\n[1]\n", 1},
		{"empty file", "", 0},
	} {
		items := writeFile(t, "items.jsonl", c.items)
		stdout, stderr, code := runCLI(t, "run", "submit", items, "--run", c.name, "--id-field", "url", "--wait", "--json", "--addr", addr)
		require.Equal(t, c.code, code, "%s:\n%s\n%s", c.name, stdout, stderr)
		require.Contains(t, stderr, fmt.Sprintf("the input has no items: run %q not created, nothing to wait for", c.name), c.name)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		var sum runSummary
		require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &sum), stdout)
		require.Zero(t, sum.Progress.Items, c.name)
		require.Empty(t, sum.RunID, c.name)
	}
	_, stderr, code := runCLI(t, "run", "submit", filepath.Join(t.TempDir(), "missing.jsonl"), "--run", "missing", "--addr", addr)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "cannot read the items: open ")
	list, _, code := runCLI(t, "run", "list", "--json", "--addr", addr)
	require.Zero(t, code)
	require.JSONEq(t, "[]", list, "no run was created")
}

// failOncePipelines: one attempt, so a provider error dead-letters the job.
const failOncePipelines = `
pipelines:
  - name: light
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object, required: [summary], properties: {summary: {type: string}}}
    retry: {max_attempts: 1, initial_backoff: 10ms, max_backoff: 10ms, deadline: 10m}
`

// TestRunRetryFailuresReplaysExactlyTheFailed: on the embedded store, the
// simulator fails the first 50 calls, which dead-letters 50 items of a run
// of 500; RetryRunFailures replays exactly those 50, from their
// checkpoints, and leaves the other 450 untouched; the same call with the
// same key replays nothing more.
func TestRunRetryFailuresReplaysExactlyTheFailed(t *testing.T) {
	t.Parallel()
	sim := startSim(t)
	sim.setFaults(t, `{"unavailable": {"count": 50}}`)
	addr := freeAddr(t)
	server := start(t, "serve", nil, embeddedServeArgs(t.TempDir(), addr, sim, writeFile(t, "p.yaml", failOncePipelines), "--lease-duration", "30s")...)
	waitHealthy(t, server, addr)
	items := writeItems(t, "items.jsonl", "r", 500)

	stdout, stderr, code := runCLI(t, "run", "submit", items, "--run", "retry", "--pipeline", "light", "--wait", "--json", "--addr", addr)
	require.Equal(t, 3, code, "items dead-lettered: exit 3\n%s\n%s", stdout, stderr)
	require.Contains(t, stderr, "oncejob run retry-failures")
	sum := lastSummary(t, stdout)
	require.EqualValues(t, 450, sum.Progress.Succeeded)
	require.EqualValues(t, 50, sum.Progress.DeadLettered)
	require.EqualValues(t, 450, sim.stats(t).BilledCalls, "the 50 failures billed nothing")
	_, jobs := runClients(t, addr)
	before := runJobs(t, jobs, sum.RunID)
	dead := map[string]bool{}
	for id, j := range before {
		if j.GetStatus() == oncejobv1.JobStatus_JOB_STATUS_DEAD_LETTERED {
			dead[id] = true
		}
	}
	require.Len(t, dead, 50)

	out, _, code := runCLI(t, "run", "retry-failures", sum.RunID, "--key", "retry-1", "--reason", "provider back", "--addr", addr)
	require.Zero(t, code, out)
	require.Contains(t, out, "replayed 50 jobs")
	require.Eventually(t, func() bool {
		s, _, _ := runCLI(t, "run", "status", sum.RunID, "--json", "--addr", addr)
		return strings.Contains(s, `"succeeded":"500"`)
	}, 60*time.Second, 100*time.Millisecond)
	after := runJobs(t, jobs, sum.RunID)
	for id, j := range after {
		require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_SUCCEEDED, j.GetStatus())
		if dead[id] {
			require.Greater(t, j.GetAttempt(), before[id].GetAttempt(), "replayed")
			continue
		}
		require.Equal(t, before[id].GetUpdateTime().AsTime(), j.GetUpdateTime().AsTime(), "job %s untouched", id)
		require.Equal(t, before[id].GetAttempt(), j.GetAttempt())
	}
	require.EqualValues(t, 550, sim.stats(t).Requests, "50 refused, 450 + 50 billed")
	require.EqualValues(t, 500, sim.stats(t).BilledCalls, "each item billed once")

	// The same key again: the first answer, nothing replayed.
	out, _, code = runCLI(t, "run", "retry-failures", sum.RunID, "--key", "retry-1", "--addr", addr)
	require.Zero(t, code, out)
	require.Contains(t, out, "replayed 50 jobs")
	for id, j := range runJobs(t, jobs, sum.RunID) {
		require.Equal(t, after[id].GetUpdateTime().AsTime(), j.GetUpdateTime().AsTime(), "job %s untouched by the repeat", id)
	}
	// A new key finds nothing failed.
	out, _, code = runCLI(t, "run", "retry-failures", sum.RunID, "--addr", addr)
	require.Zero(t, code, out)
	require.Contains(t, out, "replayed 0 jobs")
}
