package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
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

	out, stderr, code = runCLI(t, "run", "batches", sum.RunID, "--addr", addr)
	require.Zero(t, code, stderr)
	require.Regexp(t, `(?m)^batch_\S+\s+completed\s+20\s+20\s+20\s+batch\s+\d+`, out, "20 lines, answered and billed")

	// The Go SDK: the option on a run, and the run's batches.
	c := dialSDK(t, addr)
	batches, err := c.ListRunBatches(t.Context(), sum.RunID)
	require.NoError(t, err)
	require.Len(t, batches, 1, "20 calls in one batch (1,000 calls or 1 s)")
	require.Equal(t, "completed", batches[0].GetStatus())
	require.EqualValues(t, n, batches[0].GetLines())
	require.EqualValues(t, n, batches[0].GetAnsweredLines())
	require.EqualValues(t, n, batches[0].GetBilledLines(), "the provider billed what the journal answered")
	require.Equal(t, "batch", batches[0].GetPriceClass())
	run, err := c.GetRun(t.Context(), sum.RunID)
	require.NoError(t, err)
	require.Equal(t, run.GetProgress().GetUsage().GetCostMicros(), batches[0].GetCostMicros(), "the run's cost is its batch's")
	again, err := c.CreateRun(t.Context(), &oncejobv1.CreateRunRequest{Name: "sdk nightly", Pipeline: "light", ProviderBatch: true})
	require.NoError(t, err)
	require.True(t, again.GetProviderBatch())
	plain, err := c.CreateRun(t.Context(), &oncejobv1.CreateRunRequest{Name: "sdk nightly", Pipeline: "light"})
	require.NoError(t, err)
	require.NotEqual(t, again.GetId(), plain.GetId(), "the option makes another run")
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
