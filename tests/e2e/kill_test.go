package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// killPipelines gives the crash tests room: every kill costs an attempt.
const killPipelines = `
pipelines:
  - name: summarize
    version: 1
    prompt: {version: "1", template: "Summarize part {{.Chunk}} of {{.Chunks}}:\n\n{{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object, required: [summary], properties: {summary: {type: string}}}
    chunking: {size: 400, overlap: 40}
    retry: {max_attempts: 200, initial_backoff: 10ms, max_backoff: 100ms, deadline: 10m}
`

// cluster is a Postgres schema with an API server (no workers) in front.
type cluster struct {
	dbURL  string
	client oncejobv1.JobServiceClient
	store  *storepg.Store
	sim    *simProc
	pipes  string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{dbURL: storepgtest.NewMigratedSchemaURL(t), sim: startSim(t), pipes: writeFile(t, "pipelines.yaml", killPipelines)}
	addr := freeAddr(t)
	api := start(t, "serve", nil, "serve", "--database-url", c.dbURL, "--migrate", "--workers", "0", "--grpc-addr", addr, "--pipelines", c.pipes)
	waitHealthy(t, api, addr)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	c.client = oncejobv1.NewJobServiceClient(conn)
	c.store, err = storepg.Open(context.Background(), c.dbURL)
	require.NoError(t, err)
	t.Cleanup(c.store.Close)
	return c
}

// submit creates n jobs with documents of 1 to 4 chunks.
func (c *cluster) submit(t *testing.T, n int) []*oncejobv1.Job {
	t.Helper()
	var jobs []*oncejobv1.Job
	for i := range n {
		var words []string
		for w := range 40 + (i%4)*60 {
			words = append(words, fmt.Sprintf("w%d-%d", i, w))
		}
		ctx := metadata.AppendToOutgoingContext(context.Background(), "idempotency-key", fmt.Sprintf("kill-%d", i))
		resp, err := c.client.SubmitJob(ctx, &oncejobv1.SubmitJobRequest{
			Pipeline: "summarize",
			Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: strings.Join(words, " ")}},
		})
		require.NoError(t, err)
		jobs = append(jobs, resp.GetJob())
	}
	return jobs
}

func (c *cluster) allTerminal(t *testing.T, jobs []*oncejobv1.Job) bool {
	t.Helper()
	for _, j := range jobs {
		got, err := c.store.JobGetByID(context.Background(), &store.JobGetByIDParams{Tenant: "default", ID: j.GetId()})
		require.NoError(t, err)
		if !got.Status.Terminal() {
			return false
		}
	}
	return true
}

// requireExactlyOnce checks the crash-safety invariants on the cluster's
// store and simulator.
func (c *cluster) requireExactlyOnce(t *testing.T, jobs []*oncejobv1.Job) {
	t.Helper()
	requireExactlyOnce(t, c.store, c.sim, jobs)
}

// exactlyOnceStore is what requireExactlyOnce reads: either store.
type exactlyOnceStore interface {
	store.Store
	store.EngineStore
}

// requireExactlyOnce checks the crash-safety invariants: every job
// SUCCEEDED once, one result, one outbox row, events consecutive, each
// chunk billed exactly once by the provider, and the journal's billed rows
// match the provider's bills key by key.
func requireExactlyOnce(t *testing.T, db exactlyOnceStore, sim *simProc, jobs []*oncejobv1.Job) {
	t.Helper()
	ctx := context.Background()
	st := sim.stats(t)
	var chunkCheckpoints int
	for _, j := range jobs {
		got, err := db.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: "default", ID: j.GetId()})
		require.NoError(t, err)
		require.Equal(t, store.JobStatusSucceeded, got.Status, "job %s: %+v", j.GetId(), got.Error)
		require.NotEmpty(t, got.Output)

		evs, err := db.JobEventList(ctx, &store.JobEventListParams{Tenant: "default", JobID: j.GetId()})
		require.NoError(t, err)
		succeeded := 0
		for i, e := range evs {
			require.EqualValues(t, i+1, e.Seq)
			if e.Status == store.JobStatusSucceeded {
				succeeded++
			}
		}
		require.Equal(t, 1, succeeded, "job %s succeeded once", j.GetId())

		outbox, err := db.OutboxList(ctx, &store.OutboxListParams{JobID: j.GetId()})
		require.NoError(t, err)
		require.Len(t, outbox, 1, "job %s: one outbox row", j.GetId())

		cps, err := db.CheckpointList(ctx, &store.CheckpointListParams{JobID: j.GetId()})
		require.NoError(t, err)
		for _, cp := range cps {
			if cp.Stage == store.JobStageLLMDone && cp.Chunk >= 0 {
				chunkCheckpoints++
			}
		}

		journal, err := db.LLMAttemptList(ctx, &store.LLMAttemptListParams{JobID: j.GetId()})
		require.NoError(t, err)
		billedByKey := map[string]int64{}
		for _, a := range journal {
			if a.Billed {
				billedByKey[a.ProviderKey]++
			}
		}
		var calls int64
		for key, n := range billedByKey {
			require.EqualValues(t, 1, n, "job %s key %s counted once in the journal", j.GetId(), key)
			require.EqualValues(t, 1, st.CallsByKey[key], "job %s key %s billed once by the provider", j.GetId(), key)
			calls++
		}
		require.EqualValues(t, calls, got.Usage.LLMCalls, "usage matches the journal")
	}
	require.EqualValues(t, chunkCheckpoints, st.BilledCalls, "the provider billed exactly one call per chunk")
	for key, n := range st.CallsByKey {
		require.EqualValues(t, 1, n, "provider key %s billed once", key)
	}
}

// TestKillAtFailpoints kills the real worker with SIGKILL at each named
// failpoint, at random hits, and restarts it until every job is done.
func TestKillAtFailpoints(t *testing.T) {
	t.Parallel()
	for _, fp := range []string{"after_llm_response", "before_checkpoint_write", "after_checkpoint_write", "after_publish_commit", "publish_batch_in_flight"} {
		t.Run(fp, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			jobs := c.submit(t, 8)
			kills := 0
			for round := 0; ; round++ {
				require.Less(t, round, 60, "jobs did not finish after %d kills", kills)
				// The first run dies at the failpoint's first hit, for
				// certain; later ones at random hits; the last ones run
				// clean so the jobs can finish.
				var env []string
				switch {
				case round == 0:
					env = []string{"ONCEJOB_FAILPOINTS=" + fp + "=kill"}
				case round < 40:
					env = []string{"ONCEJOB_FAILPOINTS=" + fp + "=kill%25"}
				}
				w := start(t, fmt.Sprintf("worker-%d", round), env, workerArgs(c.dbURL, c.sim, c.pipes, "--workers", "4")...)
				for !w.done() && !c.allTerminal(t, jobs) {
					// Polls: the jobs run in another process, which a
					// signal of this one cannot reach.
					time.Sleep(50 * time.Millisecond)
				}
				if !w.done() {
					// The last job's publish may still reach an armed
					// failpoint after it committed: a worker that dies
					// there while being stopped has done its work.
					w.stopOrDieAt("failpoint: " + fp)
					break
				}
				require.Contains(t, w.logs.String(), "failpoint: "+fp, "the worker died, but not at the failpoint")
				kills++
			}
			t.Logf("%s: %d kills", fp, kills)
			require.Positive(t, kills, "the failpoint never fired")
			c.requireExactlyOnce(t, jobs)
		})
	}
}

// TestKillWhileABatchedPublishIsInFlight SIGKILLs the worker once the
// completer's first batch - several jobs published in one commit, none of
// them answered yet - has committed, then restarts it: every job is
// published once, none is lost, and the batch that was in flight is not
// published again.
func TestKillWhileABatchedPublishIsInFlight(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	jobs := c.submit(t, 12)
	// A long linger gathers the jobs into one batch. 300 ms was once too
	// short: in a fresh-clone CI run, with the suite running four tests at
	// once beside another package, the first batch closed on one job.
	args := workerArgs(c.dbURL, c.sim, c.pipes, "--workers", "12", "--publish-linger", "2s")
	w := start(t, "worker-killed", []string{"ONCEJOB_FAILPOINTS=publish_batch_in_flight=kill"}, args...)
	<-w.exited
	require.Contains(t, w.logs.String(), "failpoint: publish_batch_in_flight", "the worker died, but not at the failpoint")

	var inFlight []*store.Job
	for _, j := range jobs {
		got, err := c.store.JobGetByID(context.Background(), &store.JobGetByIDParams{Tenant: "default", ID: j.GetId()})
		require.NoError(t, err)
		if got.Status == store.JobStatusSucceeded {
			inFlight = append(inFlight, got)
		}
	}
	require.Greater(t, len(inFlight), 1, "the batch in flight carried several jobs, and committed")

	again := start(t, "worker-again", nil, args...)
	require.Eventually(t, func() bool { return c.allTerminal(t, jobs) }, 60*time.Second, 50*time.Millisecond)
	again.stop()
	c.requireExactlyOnce(t, jobs)
	for _, j := range inFlight {
		got, err := c.store.JobGetByID(context.Background(), &store.JobGetByIDParams{Tenant: "default", ID: j.ID})
		require.NoError(t, err)
		require.Equal(t, j.Attempt, got.Attempt, "job %s of the batch in flight was not run again", j.ID)
	}
}

// TestKillAtRandomPointsUnderLoad SIGKILLs two workers at random moments
// while they race on the same jobs.
func TestKillAtRandomPointsUnderLoad(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.sim.setFaults(t, `{"latency": "40ms"}`) // calls in flight when the kill lands
	jobs := c.submit(t, 48)
	kills := 0
	for round := 0; !c.allTerminal(t, jobs); round++ {
		require.Less(t, round, 80, "jobs did not finish")
		a := start(t, fmt.Sprintf("worker-a-%d", round), nil, workerArgs(c.dbURL, c.sim, c.pipes, "--workers", "3")...)
		b := start(t, fmt.Sprintf("worker-b-%d", round), nil, workerArgs(c.dbURL, c.sim, c.pipes, "--workers", "3")...)
		// A random moment to kill both at: the point of the test.
		time.Sleep(time.Duration(150+rand.IntN(600)) * time.Millisecond)
		if round < 15 {
			a.signal(syscall.SIGKILL)
			b.signal(syscall.SIGKILL)
			<-a.exited
			<-b.exited
			kills += 2
			continue
		}
		for !c.allTerminal(t, jobs) {
			time.Sleep(50 * time.Millisecond) // polls another process, as above
		}
		a.stop()
		b.stop()
	}
	t.Logf("%d kills", kills)
	c.requireExactlyOnce(t, jobs)
}

// TestPausedWorkerWritesNothing stops a worker past its lease with SIGSTOP;
// another takes the job over and publishes; the resumed worker must write
// nothing.
func TestPausedWorkerWritesNothing(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	// A's call must still be waiting on the simulator when the test stops
	// A: a latency far longer than a loaded machine takes to look (3 s
	// could pass first, A published and B had nothing to take over). On
	// SIGCONT A's heartbeat finds the lease lost and ends the call, so the
	// latency costs nothing when things go well.
	c.sim.setFaults(t, `{"latency": "30s"}`)
	jobs := c.submit(t, 1)
	ctx := context.Background()

	a := start(t, "worker-a", nil, workerArgs(c.dbURL, c.sim, c.pipes, "--workers", "1")...)
	var held *store.Job
	// The stages before the call are checkpointed with its answer, so
	// the call itself, reaching the simulator, says A is inside it.
	require.Eventually(t, func() bool { return c.sim.stats(t).Requests >= 1 }, 60*time.Second, 10*time.Millisecond, "worker A never reached the LLM call")
	a.signal(syscall.SIGSTOP)
	held, err := c.store.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: "default", ID: jobs[0].GetId()})
	require.NoError(t, err)
	require.Equal(t, store.JobStatusRunning, held.Status)

	// B claims the job as soon as A's lease (1s, no more heartbeats)
	// expires: no wait for it here.
	c.sim.setFaults(t, `{}`)
	b := start(t, "worker-b", nil, workerArgs(c.dbURL, c.sim, c.pipes, "--workers", "1")...)
	require.Eventually(t, func() bool { return c.allTerminal(t, jobs) }, 60*time.Second, 20*time.Millisecond)
	b.stop()

	a.signal(syscall.SIGCONT)
	// A's lease is lost: its writes, if any, must all be refused.
	require.Eventually(t, func() bool { return strings.Contains(a.logs.String(), "lease lost") }, 60*time.Second, 50*time.Millisecond)
	a.stop()

	got, err := c.store.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: "default", ID: jobs[0].GetId()})
	require.NoError(t, err)
	require.Greater(t, got.Attempt, held.Attempt, "B took the job over")
	cps, err := c.store.CheckpointList(ctx, &store.CheckpointListParams{JobID: got.ID})
	require.NoError(t, err)
	for _, cp := range cps {
		if cp.Stage != store.JobStageTextExtracted && cp.Stage != store.JobStageChunksReady {
			require.Equal(t, got.Attempt, cp.Attempt, "checkpoint %s/%d written by the paused worker", cp.Stage, cp.Chunk)
		}
	}
	c.requireExactlyOnce(t, jobs)
}
