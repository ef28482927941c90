package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/llm/pace"
)

// stormFor is how long TestProviderLimitStorm's provider answers 429 to
// everything. Longer than the pacer's MaxWait, so waiting jobs are handed
// back to the queue; 15 s keeps CI short, the 60 s runs with
// -e2e.stormfor 60s.
var stormFor = flag.Duration("e2e.stormfor", 15*time.Second, "how long TestProviderLimitStorm's provider answers 429 to everything (at least the pacer's MaxWait, 10 s)")

// TestProviderLimitStorm runs one-call jobs through the real binary while
// the simulator, an external process, answers 429 to everything for
// -e2e.stormfor, longer than a call waits in the pacer, on Postgres and on
// the embedded store (docs/architecture.md, "Provider limits"). The jobs
// are handed back to the queue (RETRY_WAIT, PROVIDER_LIMIT_WAIT, with the
// next try on the event) and claimed again, so Job.attempt grows; the
// retry budget does not: none is dead-lettered, every one succeeds once
// the provider recovers with attempts_spent 1 (the attempt that
// succeeded), billed once, and every 429 is journaled.
func TestProviderLimitStorm(t *testing.T) {
	t.Parallel()
	require.Greater(t, *stormFor, pace.MaxWaitDefault, "-e2e.stormfor must outlast the pacer's MaxWait, or no job is handed back")
	for _, embedded := range []bool{false, true} {
		t.Run(map[bool]string{false: "postgres", true: "embedded"}[embedded], func(t *testing.T) {
			t.Parallel()
			sim := startLimitedSim(t, "--latency", "20ms")
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

			// The storm lasts -e2e.stormfor and, past it, until a job was
			// handed back and claimed again: on a loaded machine the jobs
			// may reach the pacer late in a storm of a fixed length.
			sim.setFaults(t, `{"rate_limit": {"for": "1h", "retry_after": "1s"}}`)
			stormFrom := time.Now()
			const jobs = 20
			ids := make([]string, jobs)
			for i := range ids {
				ids[i] = submitOne(t, client, fmt.Sprintf("storm-%d", i), fmt.Sprintf("Document %d: submitted into a storm of 429s.", i)).GetJob().GetId()
			}
			time.Sleep(time.Until(stormFrom.Add(*stormFor)))
			require.Eventually(t, func() bool { return anyReclaimed(t, client, ids) }, 5*time.Minute, 200*time.Millisecond,
				"a job waiting for the limit past MaxWait is handed back and claimed again")
			sim.setFaults(t, `{}`)
			stormEnds := time.Now()

			limited, handedBack, reclaimed := 0, 0, 0
			for _, j := range awaitAll(t, client, ids) {
				require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_SUCCEEDED, j.GetStatus(), "no job dead-lettered: %v", j.GetError())
				require.EqualValues(t, 1, j.GetAttemptsSpent(), "job %s: a 429 or a wait for the limit spends no attempt (claims: %d)", j.GetId(), j.GetAttempt())
				require.EqualValues(t, 1, j.GetUsage().GetLlmCalls(), "job %s: one paid call", j.GetId())
				if j.GetAttempt() > 1 {
					reclaimed++
				}
				for _, a := range j.GetLlmAttempts() {
					if a.GetOutcome() == oncejobv1.LlmOutcome_LLM_OUTCOME_RATE_LIMITED {
						limited++
					}
				}
				handedBack += limitWaits(t, client, j)
			}
			t.Logf("storm of %s: %d jobs handed back %d times, %d claimed more than once, %d 429s journaled; all succeeded %s after the storm ended",
				*stormFor, jobs, handedBack, reclaimed, limited, time.Since(stormEnds).Round(time.Second))
			require.Positive(t, handedBack, "the storm outlasts MaxWait: jobs wait in the queue, not in the pacer")
			require.Positive(t, reclaimed, "a job handed back is claimed again, so its attempt grows")

			st := sim.stats(t)
			require.Positive(t, st.RateLimitedBy["fault"], "the provider refused calls")
			require.EqualValues(t, st.RateLimitedBy["fault"], limited, "every 429 is journaled")
			require.EqualValues(t, jobs, st.BilledCalls, "each job billed once")
		})
	}
}

// anyReclaimed reports whether one of the jobs ids was claimed more than
// once.
func anyReclaimed(t *testing.T, client oncejobv1.JobServiceClient, ids []string) bool {
	t.Helper()
	for _, id := range ids {
		resp, err := client.GetJob(t.Context(), &oncejobv1.GetJobRequest{JobId: id})
		require.NoError(t, err)
		if resp.GetJob().GetAttempt() > 1 {
			return true
		}
	}
	return false
}

// limitWaits reads job's events and counts its hand-backs to the queue for
// the provider limit: RETRY_WAIT, the limit named, the next try set.
func limitWaits(t *testing.T, client oncejobv1.JobServiceClient, job *oncejobv1.Job) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := client.WatchJob(ctx, &oncejobv1.WatchJobRequest{JobId: job.GetId()})
	require.NoError(t, err)
	n := 0
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return n
		}
		require.NoError(t, err)
		e := ev.GetEvent()
		if e.GetStatus() != oncejobv1.JobStatus_JOB_STATUS_RETRY_WAIT {
			continue
		}
		require.Contains(t, e.GetMessage(), "provider limit", "job %s: only the provider's limit parks a job here: %v", job.GetId(), e)
		require.NotNil(t, e.GetNextAttemptTime(), "job %s: a parked job's event says when it is tried next: %v", job.GetId(), e)
		// The next try is set when the attempt ends, the event stamped at
		// its commit: on a loaded machine the commit can come after a short
		// wait has passed (a CI run at load 17 saw it 75 ms later), so the
		// next try is held near the event, not strictly after it.
		next, at := e.GetNextAttemptTime().AsTime(), e.GetTime().AsTime()
		require.True(t, next.After(at.Add(-10*time.Second)) && next.Before(at.Add(pace.MaxWaitDefault+time.Minute)),
			"job %s: the next try is set from the attempt's end: %v", job.GetId(), e)
		n++
	}
}
