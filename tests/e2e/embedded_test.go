package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storesqlite"
)

// The embedded default: `oncejob serve` without --database-url keeps its
// jobs in SQLite under --data-dir and runs the workers in its own process.
// These tests kill that one process and restart it on the same directory.

// embeddedServeArgs runs serve on the embedded store in dir, its workers
// calling the simulator sim (nil: the built-in one). The 1s lease makes
// takeovers after a kill quick; a test that counts events exactly passes a
// longer one (a later flag wins), so a heartbeat late on a loaded machine
// cannot add a takeover.
func embeddedServeArgs(dir, addr string, sim *simProc, pipelines string, extra ...string) []string {
	args := []string{
		"serve", "--data-dir", dir, "--grpc-addr", addr,
		"--lease-duration", "1s", "--poll-interval", "20ms", "--log-level", "debug",
	}
	if sim != nil {
		args = append(args, "--llm-base-url", sim.base+"/v1", "--llm-lookup-path", llmsim.LookupPath)
	}
	if pipelines != "" {
		args = append(args, "--pipelines", pipelines)
	}
	return append(args, extra...)
}

func dialJobs(t *testing.T, addr string) oncejobv1.JobServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return oncejobv1.NewJobServiceClient(conn)
}

// openEmbedded opens the data directory's store in the test process; no
// server may be running on it.
func openEmbedded(t *testing.T, dir string) *storesqlite.Store {
	t.Helper()
	st, err := storesqlite.Open(context.Background(), storesqlite.Config{DataDir: dir})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

// waitServing is waitHealthy for a process that may be killed by a
// failpoint before it serves (its workers start first): it reports whether
// the process became healthy, or died.
func waitServing(t *testing.T, p *proc, addr string) bool {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if p.done() {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return true
		}
		time.Sleep(20 * time.Millisecond) // polls another process: no signal reaches here
	}
	t.Fatalf("%s neither served nor died", p.name)
	return false
}

// requireDied accepts the failed call err only if p died: a failpoint
// killed it during the call.
func requireDied(t *testing.T, p *proc, err error) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: call failed while the server lives: %v", p.name, err)
	}
}

func terminal(s oncejobv1.JobStatus) bool {
	switch s {
	case oncejobv1.JobStatus_JOB_STATUS_SUCCEEDED, oncejobv1.JobStatus_JOB_STATUS_FAILED,
		oncejobv1.JobStatus_JOB_STATUS_CANCELLED, oncejobv1.JobStatus_JOB_STATUS_DEAD_LETTERED:
		return true
	}
	return false
}

// killDocument is the i-th document of the crash tests: 1 to 4 chunks.
func killDocument(i int) string {
	var words []string
	for w := range 40 + (i%4)*60 {
		words = append(words, fmt.Sprintf("w%d-%d", i, w))
	}
	return strings.Join(words, " ")
}

// keyedJobs submits n jobs under fixed idempotency keys, again after every
// restart: a key answered once must answer EXISTING with the same job
// forever after; a key whose answer was lost (the server died during the
// call) may answer CREATED or EXISTING, once.
type keyedJobs struct {
	prefix string
	ids    []string
	lost   []bool
}

func newKeyedJobs(prefix string, n int) *keyedJobs {
	return &keyedJobs{prefix: prefix, ids: make([]string, n), lost: make([]bool, n)}
}

// submit submits every key to the server p; false if p died meanwhile.
func (k *keyedJobs) submit(t *testing.T, client oncejobv1.JobServiceClient, p *proc) bool {
	t.Helper()
	for i := range k.ids {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ctx = metadata.AppendToOutgoingContext(ctx, "idempotency-key", fmt.Sprintf("%s-%d", k.prefix, i))
		resp, err := client.SubmitJob(ctx, &oncejobv1.SubmitJobRequest{
			Pipeline: "summarize",
			Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: killDocument(i)}},
		})
		cancel()
		if err != nil {
			requireDied(t, p, err)
			k.lost[i] = k.lost[i] || k.ids[i] == ""
			return false
		}
		id, outcome := resp.GetJob().GetId(), resp.GetOutcome()
		switch {
		case k.ids[i] != "":
			require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING, outcome, "key %d resubmitted after a restart", i)
			require.Equal(t, k.ids[i], id, "key %d: a second job", i)
		case k.lost[i]:
			require.Contains(t, []oncejobv1.SubmitOutcome{oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING}, outcome, "key %d", i)
		default:
			require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED, outcome, "key %d", i)
		}
		require.NotEmpty(t, id)
		k.ids[i] = id
	}
	return true
}

// allTerminal asks the server p whether every job is terminal; false if
// not, or if p died.
func (k *keyedJobs) allTerminal(t *testing.T, client oncejobv1.JobServiceClient, p *proc) bool {
	t.Helper()
	for _, id := range k.ids {
		if id == "" {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := client.GetJob(ctx, &oncejobv1.GetJobRequest{JobId: id})
		cancel()
		if err != nil {
			requireDied(t, p, err)
			return false
		}
		if !terminal(resp.GetJob().GetStatus()) {
			return false
		}
	}
	return true
}

func (k *keyedJobs) jobs() []*oncejobv1.Job {
	var jobs []*oncejobv1.Job
	for _, id := range k.ids {
		jobs = append(jobs, &oncejobv1.Job{Id: id})
	}
	return jobs
}

// TestEmbeddedKillAtFailpoints is TestKillAtFailpoints on the embedded
// store: the process that is killed is the whole server (API, workers and
// store), restarted on the same data directory until every job is done.
func TestEmbeddedKillAtFailpoints(t *testing.T) {
	t.Parallel()
	for _, fp := range []string{"after_llm_response", "before_checkpoint_write", "after_checkpoint_write", "after_publish_commit", "publish_batch_in_flight"} {
		t.Run(fp, func(t *testing.T) {
			t.Parallel()
			sim := startSim(t) // its own process: billing survives the server
			pipes := writeFile(t, "pipelines.yaml", killPipelines)
			dir := t.TempDir()
			jobs := newKeyedJobs("embedded-kill", 6)
			// Every kill costs a lease (1s) before the restart takes the jobs
			// over: few random rounds keep the test short.
			const killRounds = 5
			kills := 0
			for round := 0; ; round++ {
				require.Less(t, round, killRounds+10, "jobs did not finish after %d kills", kills)
				// The first run dies at the failpoint's first hit, for
				// certain; the next ones at random hits; the last ones run
				// clean so the jobs can finish.
				var env []string
				switch {
				case round == 0:
					env = []string{"ONCEJOB_FAILPOINTS=" + fp + "=kill"}
				case round < killRounds:
					env = []string{"ONCEJOB_FAILPOINTS=" + fp + "=kill%25"}
				}
				addr := freeAddr(t)
				p := start(t, fmt.Sprintf("serve-%d", round), env, embeddedServeArgs(dir, addr, sim, pipes, "--workers", "4")...)
				if waitServing(t, p, addr) {
					client := dialJobs(t, addr)
					if jobs.submit(t, client, p) {
						for !jobs.allTerminal(t, client, p) && !p.done() {
							time.Sleep(50 * time.Millisecond) // polls the server process
						}
					}
				}
				if !p.done() { // every job is terminal
					p.signal(syscall.SIGTERM)
					select {
					case <-p.exited:
					case <-time.After(20 * time.Second):
						t.Fatalf("%s did not stop on SIGTERM", p.name)
					}
					if p.err != nil {
						// The failpoint fired between the last check and
						// SIGTERM (after_publish_commit of the last job).
						require.Contains(t, p.logs.String(), "failpoint: "+fp+" hit", "%s exit after SIGTERM: %v", p.name, p.err)
						kills++
					}
					break
				}
				<-p.exited
				require.Contains(t, p.logs.String(), "failpoint: "+fp+" hit", "%s died, but not at the failpoint: %v", p.name, p.err)
				kills++
			}
			t.Logf("%s: %d kills", fp, kills)
			require.Positive(t, kills, "the failpoint never fired")

			// The server is gone: its lock too.
			db := openEmbedded(t, dir)
			all, err := db.JobList(context.Background(), &store.JobListParams{Tenant: "default"})
			require.NoError(t, err)
			require.Len(t, all.Jobs, len(jobs.ids), "one job per idempotency key")
			requireExactlyOnce(t, db, sim, jobs.jobs())
		})
	}
}

// protoEvent and storeEvent format an event as watchJob does, so what a
// watch saw can be compared with the store.
func protoEvent(e *oncejobv1.JobEvent) string {
	return fmt.Sprintf("%d %s %s %d %s %s", e.GetSeq(), e.GetStatus(), e.GetStage(), e.GetAttempt(), e.GetMessage(), e.GetTime().AsTime().Format(time.RFC3339Nano))
}

func storeEvents(t *testing.T, db store.Store, id string) []string {
	t.Helper()
	evs, err := db.JobEventList(context.Background(), &store.JobEventListParams{Tenant: "default", JobID: id})
	require.NoError(t, err)
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%d JOB_STATUS_%s JOB_STAGE_%s %d %s %s", e.Seq, strings.ToUpper(string(e.Status)), strings.ToUpper(string(e.Stage)),
			e.Attempt, e.Message, e.CreatedAt.UTC().Format(time.RFC3339Nano)))
	}
	return out
}

func requireConsecutive(t *testing.T, events []string, from int) {
	t.Helper()
	for i, e := range events {
		require.True(t, strings.HasPrefix(e, fmt.Sprintf("%d ", from+i)), "event %d of %v", i, events)
	}
}

func submitOne(t *testing.T, client oncejobv1.JobServiceClient, key, text string) *oncejobv1.SubmitJobResponse {
	t.Helper()
	resp, err := client.SubmitJob(metadata.AppendToOutgoingContext(context.Background(), "idempotency-key", key),
		&oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: text}}})
	require.NoError(t, err)
	return resp
}

func awaitWatch(t *testing.T, w <-chan eventsOf) eventsOf {
	t.Helper()
	select {
	case got := <-w:
		return got
	case <-time.After(90 * time.Second):
		t.Fatal("the watch did not end")
		return eventsOf{}
	}
}

// TestEmbeddedWatchAcrossRestart watches a job to the end on the embedded
// store, then SIGKILLs the server while a second job waits on its LLM call;
// after a restart on the same data directory the job resumes (its lease
// expired) and a watch resuming from the last seq seen gets exactly the
// rest.
func TestEmbeddedWatchAcrossRestart(t *testing.T) {
	t.Parallel()
	sim := startSim(t)
	pipes := writeFile(t, "pipelines.yaml", killPipelines)
	dir := t.TempDir()
	addr := freeAddr(t)
	s1 := start(t, "serve-1", nil, embeddedServeArgs(dir, addr, sim, pipes, "--workers", "2", "--lease-duration", "3s")...)
	waitHealthy(t, s1, addr)
	c1 := dialJobs(t, addr)

	// A job watched from its first event to SUCCEEDED.
	a := submitOne(t, c1, "embedded-watch-a", "the embedded store keeps this job").GetJob().GetId()
	gotA := awaitWatch(t, watchJob(&replica{client: c1}, a, 0))
	require.NoError(t, gotA.err)
	// Submitted, claimed, published: a stage passed while running appends
	// no event.
	require.Len(t, gotA.events, 3, "%v", gotA.events)
	requireConsecutive(t, gotA.events, 1)
	require.Contains(t, gotA.events[0], "JOB_STATUS_QUEUED")
	require.Contains(t, gotA.events[2], "JOB_STATUS_SUCCEEDED JOB_STAGE_PUBLISHED")

	// A job killed mid-LLM call: watch it until it waits on the provider.
	// The latency outlasts any look a loaded machine takes before the kill
	// (2 s could run out first, and the job succeed); the kill ends the
	// call, so it costs nothing.
	sim.setFaults(t, `{"latency": "30s"}`)
	requestsBefore := sim.stats(t).Requests
	b := submitOne(t, c1, "embedded-watch-b", "this job outlives a SIGKILL").GetJob().GetId()
	stream, err := c1.WatchJob(context.Background(), &oncejobv1.WatchJobRequest{JobId: b})
	require.NoError(t, err)
	var seenB []string
	// The claim's event; the stages before the call append no event
	// (docs/architecture.md, "Job lifecycle"), so the call reaching the
	// simulator is what says the job waits on it.
	for !strings.Contains(strings.Join(seenB, "\n"), "JOB_STATUS_RUNNING") {
		require.Less(t, len(seenB), 7, "no RUNNING event: %v", seenB)
		resp, err := stream.Recv()
		require.NoError(t, err, "%v", seenB)
		seenB = append(seenB, protoEvent(resp.GetEvent()))
	}
	require.Eventually(t, func() bool { return sim.stats(t).Requests > requestsBefore }, 60*time.Second, 10*time.Millisecond, "the LLM call never reached the simulator")
	s1.signal(syscall.SIGKILL)
	<-s1.exited
	for {
		resp, err := stream.Recv()
		if err != nil {
			require.NotErrorIs(t, err, io.EOF, "the watch of a running job ended cleanly")
			break
		}
		seenB = append(seenB, protoEvent(resp.GetEvent()))
	}
	requireConsecutive(t, seenB, 1)
	last := len(seenB)
	require.NotContains(t, seenB[last-1], "JOB_STATUS_SUCCEEDED")
	sim.setFaults(t, `{}`)

	// Restart on the same directory: the data is there, the job resumes.
	addr2 := freeAddr(t)
	s2 := start(t, "serve-2", nil, embeddedServeArgs(dir, addr2, sim, pipes, "--workers", "2", "--lease-duration", "3s")...)
	waitHealthy(t, s2, addr2)
	c2 := dialJobs(t, addr2)
	again := submitOne(t, c2, "embedded-watch-b", "this job outlives a SIGKILL")
	require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING, again.GetOutcome())
	require.Equal(t, b, again.GetJob().GetId())
	gotA2, err := c2.GetJob(context.Background(), &oncejobv1.GetJobRequest{JobId: a})
	require.NoError(t, err)
	require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_SUCCEEDED, gotA2.GetJob().GetStatus())

	rest := awaitWatch(t, watchJob(&replica{client: c2}, b, int32(last)))
	require.NoError(t, rest.err)
	require.NotEmpty(t, rest.events)
	requireConsecutive(t, rest.events, last+1)
	require.Contains(t, rest.events[len(rest.events)-1], "JOB_STATUS_SUCCEEDED JOB_STAGE_PUBLISHED")
	tookOver := false
	for _, e := range rest.events {
		f := strings.Fields(e) // seq status stage attempt ...
		tookOver = tookOver || f[1] == "JOB_STATUS_RUNNING" && f[3] != "1"
	}
	require.True(t, tookOver, "no second attempt after the kill: %v", rest.events)
	s2.stop()

	// What the watches saw is what the store holds, and nothing happened
	// twice.
	db := openEmbedded(t, dir)
	require.Equal(t, storeEvents(t, db, a), gotA.events)
	require.Equal(t, storeEvents(t, db, b), append(seenB, rest.events...))
	requireExactlyOnce(t, db, sim, []*oncejobv1.Job{{Id: a}, {Id: b}})
}

// TestEmbeddedDataDirIsLocked starts a second server on a data directory in
// use: it must exit at once with a clear error, and the first must go on
// serving its intact data.
func TestEmbeddedDataDirIsLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := freeAddr(t)
	s1 := start(t, "serve-1", nil, embeddedServeArgs(dir, addr, nil, "", "--workers", "1", "--lease-duration", "30s")...)
	waitHealthy(t, s1, addr)
	client := dialJobs(t, addr)
	succeeded := func(id string) *oncejobv1.Job {
		t.Helper()
		var job *oncejobv1.Job
		require.Eventually(t, func() bool {
			resp, err := client.GetJob(context.Background(), &oncejobv1.GetJobRequest{JobId: id})
			require.NoError(t, err)
			job = resp.GetJob()
			return terminal(job.GetStatus())
		}, 60*time.Second, 20*time.Millisecond)
		require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_SUCCEEDED, job.GetStatus())
		return job
	}
	a := succeeded(submitOne(t, client, "embedded-lock-a", "the first server owns this directory").GetJob().GetId())

	s2 := start(t, "serve-2", nil, embeddedServeArgs(dir, freeAddr(t), nil, "", "--workers", "1", "--lease-duration", "30s")...)
	select {
	case <-s2.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("a second server on the same data directory did not exit")
	}
	var exit *exec.ExitError
	require.True(t, errors.As(s2.err, &exit), "the second server must fail: %v\n%s", s2.err, s2.logs)
	require.Equal(t, 1, exit.ExitCode(), "%s", s2.logs)
	require.Contains(t, s2.logs.String(), "in use by another oncejob process")
	require.Contains(t, s2.logs.String(), "oncejob.lock")

	// Nor may this process open it while the server runs.
	_, err := storesqlite.Open(context.Background(), storesqlite.Config{DataDir: dir})
	require.ErrorContains(t, err, "in use by another oncejob process")

	// The first server goes on: healthy, its job intact, new jobs run.
	waitHealthy(t, s1, addr)
	again := succeeded(a.GetId())
	require.NotNil(t, a.GetOutput())
	require.True(t, proto.Equal(a.GetOutput(), again.GetOutput()), "output %v, then %v", a.GetOutput(), again.GetOutput())
	b := succeeded(submitOne(t, client, "embedded-lock-b", "and keeps serving after the intruder left").GetJob().GetId())
	s1.stop()

	db := openEmbedded(t, dir)
	all, err := db.JobList(context.Background(), &store.JobListParams{Tenant: "default"})
	require.NoError(t, err)
	require.Len(t, all.Jobs, 2)
	for _, id := range []string{a.GetId(), b.GetId()} {
		job, err := db.JobGetByID(context.Background(), &store.JobGetByIDParams{Tenant: "default", ID: id})
		require.NoError(t, err)
		require.Equal(t, store.JobStatusSucceeded, job.Status)
		evs := storeEvents(t, db, id)
		require.Len(t, evs, 3, "%v", evs) // submitted, claimed, published
		requireConsecutive(t, evs, 1)
	}
}
