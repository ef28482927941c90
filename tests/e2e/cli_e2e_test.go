package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// cliPipelines adds to the built-in summarize one pipeline that waits for
// approval and one that gives up after a single attempt.
const cliPipelines = `
pipelines:
  - name: reviewed
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object, required: [summary], properties: {summary: {type: string}}}
    require_approval: true
  - name: fragile
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object, required: [summary], properties: {summary: {type: string}}}
    retry: {max_attempts: 1, initial_backoff: 10ms, max_backoff: 10ms, deadline: 1m}
`

// cli runs the real binary's client commands against addr.
type cli struct {
	t    *testing.T
	addr string
}

// run returns stdout, stderr and the exit code.
func (c cli) run(stdin string, args ...string) (string, string, int) {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "oncejob"), args...)
	cmd.Env = append(os.Environ(), "ONCEJOB_ADDR="+c.addr)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(c.t, err)
	}
	return stdout.String(), stderr.String(), code
}

var jobIDRE = regexp.MustCompile(`job ([0-9a-f-]{36})`)

// TestCLISubmitWaitReplay: `submit --wait` of a file shows every transition
// (each naming its stage: a stage-only advance has no event) and ends
// SUCCEEDED (exit 0); the same command again prints the same job id
// and says it was a replay; list, get and watch --json parse as JSON.
func TestCLISubmitWaitReplay(t *testing.T) {
	t.Parallel()
	addr := serveEmbedded(t)
	c := cli{t: t, addr: addr}
	file := writeFile(t, "invoice-42.txt", "Invoice 42: 3 licences, EUR 1,200, due 2026-12-31.")

	out, errOut, code := c.run("", "submit", file, "--wait", "--param", "language=en", "--label", "team=billing")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	m := jobIDRE.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	id := m[1]
	require.Contains(t, out, "submitted: job "+id+" (created")
	stages := []string{"uploaded", "published"}
	last := 0
	for _, s := range stages {
		i := strings.Index(out, " "+s+" ")
		require.Greater(t, i, -1, "stage %s not shown:\n%s", s, out)
		require.GreaterOrEqual(t, i, last, "stage %s out of order:\n%s", s, out)
		last = i
	}
	require.Regexp(t, `(?m)^status:\s+SUCCEEDED$`, out)
	keyLine := regexp.MustCompile(`(?m)^key: ([0-9a-f]{64})$`).FindStringSubmatch(out)
	require.NotNil(t, keyLine, "the derived key is printed:\n%s", out)

	again, errOut, code := c.run("", "submit", file, "--wait", "--param", "language=en", "--label", "team=other")
	require.Equal(t, 0, code, "%s\n%s", again, errOut)
	require.Contains(t, again, "replayed: job "+id)
	require.Contains(t, again, "key: "+keyLine[1])

	// list --json: a JSON array holding the one job.
	out, errOut, code = c.run("", "list", "--json")
	require.Equal(t, 0, code, errOut)
	var jobs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &jobs), out)
	require.Len(t, jobs, 1)
	require.Equal(t, id, jobs[0]["id"])

	// get --json: the job, with its output.
	out, errOut, code = c.run("", "get", id, "--json")
	require.Equal(t, 0, code, errOut)
	var job map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &job), out)
	require.Equal(t, "JOB_STATUS_SUCCEEDED", job["status"])
	require.Equal(t, "billing", job["labels"].(map[string]any)["team"])
	require.NotEmpty(t, job["output"])

	// watch --json: one event per line, seq 1..3 (submitted, claimed,
	// published: stage-only advances append no event).
	out, errOut, code = c.run("", "watch", id, "--json")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	for i, l := range lines {
		var e map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &e), l)
		require.EqualValues(t, i+1, e["seq"])
	}

	// Human list and stdin submission.
	out, _, code = c.run("", "list")
	require.Equal(t, 0, code)
	require.Regexp(t, `(?m)^ID\s+STATUS\s+STAGE`, out)
	require.Contains(t, out, id)
	out, errOut, code = c.run("from stdin", "submit", "-", "--json")
	require.Equal(t, 0, code, errOut)
	var sub map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &sub), out)
	require.Equal(t, "SUBMIT_OUTCOME_CREATED", sub["outcome"])
	require.Equal(t, false, sub["replayed"])
}

// TestCLIExitCodes: each documented exit code, from the real binary.
func TestCLIExitCodes(t *testing.T) {
	t.Parallel()
	pipes := writeFile(t, "pipelines.yaml", cliPipelines)
	addr := freeAddr(t)
	p := start(t, "serve-cli", nil, "serve", "--data-dir", t.TempDir(), "--grpc-addr", addr, "--pipelines", pipes, "--poll-interval", "20ms")
	t.Cleanup(p.stop)
	waitHealthy(t, p, addr)
	c := cli{t: t, addr: addr}
	doc := writeFile(t, "doc.txt", "A short document.")
	idOf := func(out string) string {
		m := jobIDRE.FindStringSubmatch(out)
		require.NotNil(t, m, out)
		return m[1]
	}

	// 1: the call failed (here: no such job); 2: usage.
	_, errOut, code := c.run("", "get", "00000000-0000-4000-8000-000000000000")
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "NotFound")
	_, _, code = c.run("", "get")
	require.Equal(t, 2, code)
	_, _, code = c.run("", "list", "--no-such-flag")
	require.Equal(t, 2, code)
	_, _, code = c.run("", "resolve", "00000000-0000-4000-8000-000000000000")
	require.Equal(t, 2, code, "resolve needs --retry or --fail")

	// 3: FAILED (a media type no stage can read).
	out, errOut, code := c.run("", "submit", writeFile(t, "doc.pdf", "%PDF-1.7"), "--wait")
	require.Equal(t, 3, code, "%s\n%s", out, errOut)
	require.Contains(t, errOut, "FAILED")

	// 6: the wait ended before the job (awaiting approval) did.
	out, errOut, code = c.run("", "submit", doc, "--pipeline", "reviewed")
	require.Equal(t, 0, code, errOut)
	reviewed := idOf(out)
	_, errOut, code = c.run("", "wait", reviewed, "--timeout", "1s")
	require.Equal(t, 6, code, errOut)
	require.Contains(t, errOut, "--timeout")

	// 5: CANCELLED, by rejecting it.
	out, errOut, code = c.run("", "approve", reviewed, "--reject", "--reason", "not this one")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^status:\s+CANCELLED$`, out)
	_, _, code = c.run("", "wait", reviewed)
	require.Equal(t, 5, code)

	// A refused operator call is an error (1), naming the job's status.
	_, errOut, code = c.run("", "replay", reviewed)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "is CANCELLED")

	// 4: DEAD_LETTERED: a server whose provider is always unavailable, and
	// a pipeline with one attempt.
	sim := startSim(t)
	sim.setFaults(t, `{"unavailable": {}}`)
	addr2 := freeAddr(t)
	p2 := start(t, "serve-cli-dead", nil, "serve", "--data-dir", t.TempDir(), "--grpc-addr", addr2, "--pipelines", pipes,
		"--llm-base-url", sim.base+"/v1", "--poll-interval", "20ms")
	t.Cleanup(p2.stop)
	waitHealthy(t, p2, addr2)
	out, errOut, code = cli{t: t, addr: addr2}.run("", "submit", doc, "--pipeline", "fragile", "--wait")
	require.Equal(t, 4, code, "%s\n%s", out, errOut)
	require.Contains(t, errOut, "DEAD_LETTERED")
	dead := idOf(out)

	// replay queues it again, once per key.
	out, errOut, code = cli{t: t, addr: addr2}.run("", "replay", dead, "--key", "replay-once", "--json")
	require.Equal(t, 0, code, errOut)
	var replayed map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &replayed), out)
	require.Contains(t, []any{"JOB_STATUS_QUEUED", "JOB_STATUS_RUNNING", "JOB_STATUS_DEAD_LETTERED"}, replayed["status"])
}
