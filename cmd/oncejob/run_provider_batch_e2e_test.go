package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// onlinePipelines: the pipeline of batchPipelines with a profile of no
// provider_batch of its own: only a run's --provider-batch sends its calls
// in batches, through the profile's twin.
const onlinePipelines = `
model_profiles:
  online:
    model: sim-1
    prompt_micros_per_1k: 1000
    completion_micros_per_1k: 2000
pipelines:
  - name: light
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [online]
    output_schema: {type: object, required: [summary], properties: {summary: {type: string}}}
    retry: {max_attempts: 20, initial_backoff: 10ms, max_backoff: 200ms, deadline: 10m}
`

// TestRunProviderBatchFlag: `oncejob run submit --provider-batch` against
// serve and the simulator, each a process of its own: every item
// SUCCEEDED, each call billed once at the batch price, none online. The
// run says it waited on a batch window until its items were done.
func TestRunProviderBatchFlag(t *testing.T) {
	t.Parallel()
	const n = 20
	sim, _ := batchSim(t, 300*time.Millisecond)
	addr := freeAddr(t)
	p := start(t, "serve", nil, "serve", "--grpc-addr", addr, "--data-dir", t.TempDir(),
		"--pipelines", writeFile(t, "pipelines.yaml", onlinePipelines),
		"--llm-base-url", sim.base+"/v1", "--llm-batch-api", "--poll-interval", "20ms", "--relays", "0")
	t.Cleanup(p.stop)
	waitHealthy(t, p, addr)

	stdout, stderr, code := runCLI(t, "run", "submit", writeItems(t, "items.jsonl", "pb", n), "--run", "nightly",
		"--pipeline", "light", "--provider-batch", "--wait", "--json", "--addr", addr)
	require.Zero(t, code, "%s\n%s", stdout, stderr)
	sum := lastSummary(t, stdout)
	require.EqualValues(t, n, sum.Progress.Succeeded, "%+v", sum)
	require.True(t, sum.Progress.Complete)

	st := sim.stats(t)
	require.EqualValues(t, n, st.BatchBilledCalls)
	require.Zero(t, st.BilledCalls, "no call went online")
	require.Len(t, st.BatchCallsByKey, n)
	for key, c := range st.BatchCallsByKey {
		require.EqualValues(t, 1, c, "%s billed once", key)
	}

	out, stderr, code := runCLI(t, "run", "status", sum.RunID, "--json", "--addr", addr)
	require.Zero(t, code, stderr)
	require.Contains(t, out, `"providerBatch":true`)
	require.NotContains(t, out, "providerBatchWindow", "nothing left to wait for")
	out, stderr, code = runCLI(t, "list", "--pipeline", "light", "--json", "--addr", addr)
	require.Zero(t, code, stderr)
	require.Equal(t, n, strings.Count(out, `"modelProfile":"online@batch"`), out)
}

// TestRunProviderBatchFlagRefused: a server whose provider is not said to
// have a batch API refuses `run submit --provider-batch`, saying why.
func TestRunProviderBatchFlagRefused(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	p := start(t, "serve", nil, "serve", "--grpc-addr", addr, "--data-dir", t.TempDir(),
		"--pipelines", writeFile(t, "pipelines.yaml", onlinePipelines), "--llm-base-url", "http://127.0.0.1:9/v1", "--relays", "0")
	t.Cleanup(p.stop)
	waitHealthy(t, p, addr)
	_, stderr, code := runCLI(t, "run", "submit", writeItems(t, "items.jsonl", "pr", 2), "--run", "refused",
		"--pipeline", "light", "--provider-batch", "--addr", addr)
	require.NotZero(t, code)
	require.Contains(t, stderr, "provider_batch")
	require.Contains(t, stderr, "no batch API")
}
