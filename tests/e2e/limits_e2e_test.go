package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/llm/llmsim"
)

// startLimitedSim is `oncejob llm-sim` enforcing limits (its flags).
func startLimitedSim(t *testing.T, args ...string) *simProc {
	t.Helper()
	addr := freeAddr(t)
	p := start(t, "llm-sim", nil, append([]string{"llm-sim", "--addr", addr}, args...)...)
	s := &simProc{proc: p, base: "http://" + addr}
	require.Eventually(t, func() bool {
		resp, err := http.Get(s.base + "/oncejob/stats")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond)
	return s
}

// awaitAll waits for every job to finish and returns them.
func awaitAll(t *testing.T, client oncejobv1.JobServiceClient, ids []string) []*oncejobv1.Job {
	t.Helper()
	out := make([]*oncejobv1.Job, len(ids))
	deadline := time.Now().Add(2 * time.Minute)
	for i, id := range ids {
		for {
			resp, err := client.GetJob(context.Background(), &oncejobv1.GetJobRequest{JobId: id, View: oncejobv1.JobView_JOB_VIEW_FULL})
			require.NoError(t, err)
			if terminal(resp.GetJob().GetStatus()) {
				out[i] = resp.GetJob()
				break
			}
			require.True(t, time.Now().Before(deadline), "job %s never finished: %v", id, resp.GetJob())
			time.Sleep(50 * time.Millisecond)
		}
	}
	return out
}

// TestProviderLimits runs one-call jobs through the real binary against
// the simulator, as an external process, enforcing a provider limit of
// 1,200 requests a minute (20 per one-second window), on Postgres and on
// the embedded store: every job succeeds, none is dead-lettered, and the
// provider answers no 429 (docs/architecture.md, "Provider limits"). Then
// the provider answers 429 to everything for 3 s, shorter than a call
// waits in the pacer: no job is dead-lettered, none is claimed twice or
// spends an attempt, and every one finishes afterwards. A storm longer
// than that wait is TestProviderLimitStorm.
func TestProviderLimits(t *testing.T) {
	t.Parallel()
	for _, embedded := range []bool{false, true} {
		t.Run(map[bool]string{false: "postgres", true: "embedded"}[embedded], func(t *testing.T) {
			t.Parallel()
			sim := startLimitedSim(t, "--limit-requests", "20", "--limit-window", "1s", "--latency", "20ms")
			pipes := writeFile(t, "pipelines.yaml", "model_profiles:\n  default:\n    model: oncejob-sim-1\n    limits: {requests_per_minute: 1200}\n")
			var addr string
			if embedded {
				addr = freeAddr(t)
				p := start(t, "serve-embedded", nil, embeddedServeArgs(t.TempDir(), addr, sim, pipes, "--lease-duration", "10s")...)
				t.Cleanup(p.stop)
				waitHealthy(t, p, addr)
			} else {
				addr = serve(t, "--llm-base-url", sim.base+"/v1", "--llm-lookup-path", llmsim.LookupPath, "--pipelines", pipes, "--poll-interval", "20ms")
			}
			client := dialJobs(t, addr)
			submit := func(prefix string, n int) []string {
				ids := make([]string, n)
				for i := range ids {
					key := fmt.Sprintf("%s-%d", prefix, i)
					ids[i] = submitOne(t, client, key, fmt.Sprintf("Document %s %d: the provider's limit paces this call.", prefix, i)).GetJob().GetId()
				}
				return ids
			}

			const jobs = 60
			for _, j := range awaitAll(t, client, submit("paced", jobs)) {
				require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_SUCCEEDED, j.GetStatus(), "%v", j.GetError())
			}
			st := sim.stats(t)
			require.EqualValues(t, jobs, st.BilledCalls)
			require.LessOrEqual(t, float64(st.RateLimited), 0.01*float64(st.Requests), "429s: %v of %d requests", st.RateLimitedBy, st.Requests)

			sim.setFaults(t, `{"rate_limit": {"for": "3s", "retry_after": "1s"}}`)
			const refused = 20
			limited := 0
			for _, j := range awaitAll(t, client, submit("refused", refused)) {
				require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_SUCCEEDED, j.GetStatus(), "%v", j.GetError())
				require.EqualValues(t, 1, j.GetAttempt(), "a 429 spends no attempt")
				require.EqualValues(t, 1, j.GetAttemptsSpent(), "a 429 spends no attempt")
				for _, a := range j.GetLlmAttempts() {
					if a.GetOutcome() == oncejobv1.LlmOutcome_LLM_OUTCOME_RATE_LIMITED {
						limited++
					}
				}
			}
			st = sim.stats(t)
			require.Positive(t, st.RateLimitedBy["fault"], "the provider refused calls")
			require.EqualValues(t, st.RateLimitedBy["fault"], limited, "every 429 is journaled")
			require.EqualValues(t, jobs+refused, st.BilledCalls)
		})
	}
}
