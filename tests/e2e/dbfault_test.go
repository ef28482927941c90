package e2e

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/pgcluster"
	"github.com/oncejob/oncejob/store/storepg/pgproxy"
)

// The database fault tests: a throwaway Postgres cluster per test, the real
// binaries in front of it, each process through a proxy of its own that can
// cut, stall and slow its connections (store/storepg/pgproxy), and the
// test's own connection straight to the cluster to check the outcome.

// faultPipelines are the kill tests' pipelines and one that allows a job a
// single attempt: an outage must not spend it.
const faultPipelines = killPipelines + `
  - name: fragile
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object, required: [summary], properties: {summary: {type: string}}}
    retry: {max_attempts: 1, initial_backoff: 10ms, max_backoff: 100ms, deadline: 10m}
`

// faultEnv is one throwaway cluster, migrated, and the simulator.
type faultEnv struct {
	pg    *pgcluster.Cluster
	db    *storepg.Store // straight to the cluster, never through a proxy
	sim   *simProc
	pipes string
}

func newFaultEnv(t *testing.T) *faultEnv {
	t.Helper()
	pg := pgcluster.ForTest(t)
	ctx := context.Background()
	db, err := storepg.Open(ctx, pg.URL("postgres"))
	require.NoError(t, err)
	t.Cleanup(db.Close)
	require.NoError(t, storepg.Migrate(ctx, db.Pool()))
	return &faultEnv{pg: pg, db: db, sim: startSim(t), pipes: writeFile(t, "pipelines.yaml", faultPipelines)}
}

// proxy starts a proxy to the cluster.
func (e *faultEnv) proxy(t *testing.T) *pgproxy.Proxy {
	t.Helper()
	p, err := pgproxy.Start(e.pg.Addr())
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// serve starts `oncejob serve` through p with workers in-process (0: an
// API-only replica) and waits until it is healthy.
func (e *faultEnv) serve(t *testing.T, p *pgproxy.Proxy, workers int, extra ...string) (*proc, string) {
	t.Helper()
	addr := freeAddr(t)
	s := start(t, "serve", nil, append([]string{"serve",
		"--database-url", pgcluster.URL(p.Addr(), "postgres"), "--grpc-addr", addr,
		"--pipelines", e.pipes, "--workers", strconv.Itoa(workers),
		"--llm-base-url", e.sim.base + "/v1", "--llm-lookup-path", llmsim.LookupPath,
		"--lease-duration", "1s", "--poll-interval", "20ms", "--log-level", "info"}, extra...)...)
	waitHealthy(t, s, addr)
	return s, addr
}

// worker starts `oncejob worker` through p.
func (e *faultEnv) worker(t *testing.T, name string, p *pgproxy.Proxy, workers int) *proc {
	t.Helper()
	return start(t, name, nil, workerArgs(pgcluster.URL(p.Addr(), "postgres"), e.sim, e.pipes, "--workers", strconv.Itoa(workers))...)
}

// submit creates one job per key, without faults. It sets a case up, so
// an answer of UNAVAILABLE (STORE_UNAVAILABLE: a store read slowed by the
// machine's load, or an earlier case's fault still passing) is retried
// with the same key, as every client of the API does, for up to 30 s.
func (e *faultEnv) submit(t *testing.T, client oncejobv1.JobServiceClient, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		key := prefix + "-" + strconv.Itoa(i)
		req := &oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: submitDoc(key, i)}}}
		ctx := metadata.AppendToOutgoingContext(context.Background(), "idempotency-key", key)
		for give := time.Now().Add(30 * time.Second); ; {
			resp, err := client.SubmitJob(ctx, req)
			if storeUnavailable(err) && time.Now().Before(give) {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			require.NoError(t, err)
			ids[i] = resp.GetJob().GetId()
			break
		}
	}
	return ids
}

// allJobs returns the ids of every job in the cluster: the checks after a
// fault cover them all, since a job a fault touched may be one an earlier
// case left queued.
func (e *faultEnv) allJobs(t *testing.T) []string {
	t.Helper()
	var ids []string
	params := &store.JobListParams{Tenant: "default", Limit: 500}
	for {
		page, err := e.db.JobList(context.Background(), params)
		require.NoError(t, err)
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		if page.Next == nil {
			return ids
		}
		params.After = page.Next
	}
}

// waitEnded waits until every job is terminal, reading the cluster
// directly.
func (e *faultEnv) waitEnded(t *testing.T, ids []string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, id := range ids {
			j, err := e.db.JobGetByID(context.Background(), &store.JobGetByIDParams{Tenant: "default", ID: id})
			if err != nil || !j.Status.Terminal() {
				return false
			}
		}
		return true
	}, 90*time.Second, 50*time.Millisecond, "the jobs did not all end")
}

// requireOnce checks every job ended SUCCEEDED once with one result, one
// outbox row and one bill per chunk (requireExactlyOnce), and that no
// write of an attempt reached the log after a later attempt took the job
// over: the attempt numbers of a job's events never go down.
func (e *faultEnv) requireOnce(t *testing.T, ids []string) {
	t.Helper()
	jobs := make([]*oncejobv1.Job, len(ids))
	for i, id := range ids {
		jobs[i] = &oncejobv1.Job{Id: id}
	}
	requireExactlyOnce(t, e.db, e.sim, jobs)
	for _, id := range ids {
		evs, err := e.db.JobEventList(context.Background(), &store.JobEventListParams{Tenant: "default", JobID: id})
		require.NoError(t, err)
		for i := 1; i < len(evs); i++ {
			require.GreaterOrEqual(t, evs[i].Attempt, evs[i-1].Attempt,
				"job %s: event %d (attempt %d) after event %d (attempt %d): a fenced-out attempt wrote", id, evs[i].Seq, evs[i].Attempt, evs[i-1].Seq, evs[i-1].Attempt)
		}
	}
}

// lostClaims counts the jobs whose log shows a claim the worker never
// heard of: a RUNNING event followed directly by the next attempt's.
func (e *faultEnv) lostClaims(t *testing.T, ids []string) int {
	t.Helper()
	n := 0
	for _, id := range ids {
		evs, err := e.db.JobEventList(context.Background(), &store.JobEventListParams{Tenant: "default", JobID: id})
		require.NoError(t, err)
		for i := 1; i < len(evs); i++ {
			if evs[i-1].Status == store.JobStatusRunning && evs[i].Status == store.JobStatusRunning && evs[i].Attempt == evs[i-1].Attempt+1 {
				n++
				break
			}
		}
	}
	return n
}

// requireWatchesSawTheLog checks each resumed watch ended and saw exactly
// the job's events, in order, each once, and resumed only after outage
// errors. Across a failover (promoted set) an event may differ from the
// log's only as a change the failover lost (requireLostWithThePrimary).
func (e *faultEnv) requireWatchesSawTheLog(t *testing.T, watches map[string]<-chan watchResult, promoted time.Time) int {
	t.Helper()
	resumed := 0
	for id, w := range watches {
		var got watchResult
		select {
		case got = <-w:
		case <-time.After(120 * time.Second):
			t.Fatalf("watch of %s never returned", id)
		}
		require.NoError(t, got.err)
		for _, err := range got.resumed {
			require.True(t, storeUnavailable(err), "watch of %s ended with %v; a store outage must be UNAVAILABLE/STORE_UNAVAILABLE", id, err)
		}
		resumed += len(got.resumed)
		if promoted.IsZero() {
			require.Equal(t, storeEvents(t, e.db, id), got.events, "watch of %s", id)
		} else {
			requireLostWithThePrimary(t, id, got.events, storeEvents(t, e.db, id), promoted)
		}
	}
	return resumed
}

func waitFired(t *testing.T, in *pgproxy.Injection) {
	t.Helper()
	select {
	case <-in.Fired():
	case <-time.After(60 * time.Second):
		t.Fatal("the fault never fired")
	}
}

// waitRowLockedPastLease waits until job id's row is locked by another
// transaction (a publish whose commit a StallCommit holds) and the lease
// its last committed version shows has expired by the database's clock:
// from then on only the row lock keeps another worker's claim off it.
func (e *faultEnv) waitRowLockedPastLease(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	require.Eventually(t, func() bool {
		var expired bool
		err := e.db.Pool().QueryRow(ctx, `SELECT lease_until < clock_timestamp() FROM jobs WHERE id = $1`, id).Scan(&expired)
		if err != nil || !expired {
			return false
		}
		tx, err := e.db.Pool().Begin(ctx)
		if err != nil {
			return false
		}
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE NOWAIT`, id)
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == "55P03" // lock_not_available
	}, 60*time.Second, 20*time.Millisecond, "the publish never held the row past the lease")
}

// waitClaimsPassedOver waits until the worker behind p has sent two claims
// from now on (its claims are one at a time, so the first has answered),
// or until job id shows another attempt (the claim took it: the caller's
// check of the attempt says so).
func (e *faultEnv) waitClaimsPassedOver(t *testing.T, p *pgproxy.Proxy, id string) {
	t.Helper()
	claims := p.Inject(pgproxy.Fault{Statement: "JobClaim", Action: pgproxy.StallBefore, Times: 2})
	require.Eventually(t, func() bool {
		if claims.Count() >= 2 {
			return true
		}
		j, err := e.db.JobGetByID(context.Background(), &store.JobGetByIDParams{Tenant: "default", ID: id})
		return err == nil && j.Attempt != 1
	}, 60*time.Second, 20*time.Millisecond, "the worker claimed no more")
}

// httpStatus is the status code of GET path on addr; 0 when it does not
// answer.
func httpStatus(t *testing.T, addr, path string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestPostgresRestartUnderLoad restarts Postgres (fast, then immediate
// shutdown) while clients submit, watchers watch and workers in two
// processes run jobs. No acknowledged submit is lost, every job ends once,
// calls meanwhile are answered UNAVAILABLE/STORE_UNAVAILABLE (or hit their
// deadline) and never hang, readiness goes NOT_SERVING and back while
// liveness stays up, and the service recovers without a restart.
func TestPostgresRestartUnderLoad(t *testing.T) {
	t.Parallel()
	for _, mode := range []pgcluster.ShutdownMode{pgcluster.Fast, pgcluster.Immediate} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			e := newFaultEnv(t)
			httpAddr := freeAddr(t)
			api, addr := e.serve(t, e.proxy(t), 2, "--http-addr", httpAddr)
			w := e.worker(t, "worker", e.proxy(t), 2)
			client := dialJobs(t, addr)
			health := pollHealth(t, addr)

			load := startSubmitters(t, client, 3, "restart", 100*time.Millisecond)
			require.Eventually(t, func() bool { return len(load.ackedIDs()) >= 6 }, 60*time.Second, 10*time.Millisecond)
			watches := map[string]<-chan watchResult{}
			for _, id := range load.ackedIDs()[:6] {
				watches[id] = resumingWatch(client, id, 120*time.Second)
			}

			ctx := context.Background()
			require.NoError(t, e.pg.Stop(ctx, mode))
			health.waitReady(t, healthpb.HealthCheckResponse_NOT_SERVING)
			// The HTTP probes say the same: not ready, still alive.
			require.Eventually(t, func() bool { return httpStatus(t, httpAddr, "/readyz") == http.StatusServiceUnavailable }, 60*time.Second, 20*time.Millisecond)
			require.Equal(t, http.StatusOK, httpStatus(t, httpAddr, "/livez"))
			// Meanwhile a call is told the store is unavailable, at once.
			cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, "idempotency-key", "restart-while-down"), callDeadline)
			_, err := client.SubmitJob(cctx, &oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "while down"}}})
			cancel()
			require.True(t, storeUnavailable(err), "a submit while Postgres is down (not its deadline's end): %v", err)
			require.NoError(t, e.pg.Start(ctx))
			health.waitReady(t, healthpb.HealthCheckResponse_SERVING)
			require.Eventually(t, func() bool { return httpStatus(t, httpAddr, "/readyz") == http.StatusOK }, 60*time.Second, 20*time.Millisecond)

			time.Sleep(time.Second) // load after the restart, on the recovered pools
			acked, failed := load.stop()
			sawNotReady, liveness := health.stop()
			t.Logf("%s: %d keys acknowledged, %d calls failed during the outage", mode, len(acked), failed)
			require.True(t, sawNotReady)
			require.Empty(t, liveness, "liveness must stay SERVING")
			require.Positive(t, failed, "no call saw the outage")

			ids := make([]string, 0, len(acked))
			for key, id := range acked {
				j, err := e.db.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: "default", ID: id})
				require.NoError(t, err, "acknowledged key %s lost its job", key)
				require.Equal(t, key, j.IdempotencyKey)
				ids = append(ids, id)
			}
			e.waitEnded(t, ids)
			e.requireOnce(t, ids)
			t.Logf("%s: watches resumed %d times", mode, e.requireWatchesSawTheLog(t, watches, time.Time{}))
			w.stop()
			api.stop()
			requireServerAnswered(t, api)
			// The workers backed off while the store was down rather than
			// logging a failed claim every poll.
			require.LessOrEqual(t, strings.Count(w.logs.String(), "claim failed"), 5, "failed claims logged")
			require.NotContains(t, api.logs.String(), `"grpc.code":"Internal"`)
		})
	}
}

// storeTimeout is the API server's --store-timeout in TestConnectionFaults.
const storeTimeout = 1500 * time.Millisecond

// TestStoreOutageCostsNoAttempt restarts Postgres while jobs of a pipeline
// that allows one attempt wait on their LLM calls; the calls return while
// the database is down, so their journal writes fail. The workers give the
// interrupted attempts back once the store answers, instead of letting the
// lease expire and the takeover spend the only attempt: every job still
// succeeds, once.
func TestStoreOutageCostsNoAttempt(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	_, addr := e.serve(t, e.proxy(t), 0)
	client := dialJobs(t, addr)
	ids := make([]string, 3)
	for i := range ids {
		key := "fragile-" + strconv.Itoa(i)
		// Retried with its key while Unavailable, as the SDKs do: a
		// dev-mode server's look for a first key (500 ms) can run out on a
		// loaded machine, and the answer says retry (CI at c0d238e).
		var (
			resp     *oncejobv1.SubmitJobResponse
			err      error
			deadline = time.Now().Add(30 * time.Second)
		)
		for {
			resp, err = client.SubmitJob(metadata.AppendToOutgoingContext(context.Background(), "idempotency-key", key),
				&oncejobv1.SubmitJobRequest{Pipeline: "fragile", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: key + " is a short document"}}})
			if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		require.NoError(t, err)
		ids[i] = resp.GetJob().GetId()
	}
	// A lease far longer than the outage: without the requeue the jobs
	// would wait it out and be taken over, spending their one attempt. The
	// answers' writes are held at the worker's proxy until Postgres is
	// down, so they fail in the outage however long the stop takes on a
	// loaded machine (a fixed latency could run out first, the writes land
	// and no attempt is cut short); the stop cuts the held connections.
	wp := e.proxy(t)
	held := wp.Inject(pgproxy.Fault{Statement: "CheckpointWriteMany", Action: pgproxy.StallBefore, Duration: time.Minute, Times: len(ids)})
	defer held.Release()
	w := start(t, "worker", nil, append(workerArgs(pgcluster.URL(wp.Addr(), "postgres"), e.sim, e.pipes, "--workers", "3"), "--lease-duration", "10s")...)
	waitFired(t, held)
	require.Eventually(t, func() bool { st := e.sim.stats(t); return st.Requests >= 3 && st.InFlight == 0 }, 60*time.Second, 10*time.Millisecond, "the LLM calls never all answered")
	ctx := context.Background()
	require.NoError(t, e.pg.Stop(ctx, pgcluster.Fast))
	held.Release()
	require.Eventually(t, func() bool {
		return strings.Count(w.logs.String(), "the store failed under the attempt; requeueing") >= len(ids)
	}, 60*time.Second, 20*time.Millisecond, "the attempts were not all cut short by the outage")
	require.NoError(t, e.pg.Start(ctx))
	e.waitEnded(t, ids)
	w.stop()
	e.requireOnce(t, ids)
	require.Contains(t, w.logs.String(), "job requeued after a store outage")
}

// TestConnectionFaults cuts and stalls the connections of the processes at
// the statements that matter — mid-submit, mid-claim, mid-checkpoint,
// mid-publish, mid-watch — and checks the same properties after each.
func TestConnectionFaults(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	apiProxy := e.proxy(t)
	api, addr := e.serve(t, apiProxy, 0, "--store-timeout", storeTimeout.String())
	client := dialJobs(t, addr)
	ctx := context.Background()

	t.Run("SubmitCutAfterCommit", func(t *testing.T) {
		// The statement committed, the answer was lost: the client is told
		// the store is unavailable, and its retry finds the job.
		in := apiProxy.Inject(pgproxy.Fault{Statement: "JobSubmitMany", Action: pgproxy.CutAfter})
		cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, "idempotency-key", "cut-after-submit"), callDeadline)
		defer cancel()
		req := &oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "cut after submit"}}}
		_, err := client.SubmitJob(cctx, req)
		require.True(t, storeUnavailable(err), "%v", err)
		require.Equal(t, 1, in.Count())
		resp := submitOne(t, client, "cut-after-submit", "cut after submit")
		require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING, resp.GetOutcome())
	})

	t.Run("SubmitCutBefore", func(t *testing.T) {
		in := apiProxy.Inject(pgproxy.Fault{Statement: "JobSubmitMany", Action: pgproxy.CutBefore})
		cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, "idempotency-key", "cut-before-submit"), callDeadline)
		defer cancel()
		_, err := client.SubmitJob(cctx, &oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "cut before submit"}}})
		require.True(t, storeUnavailable(err), "%v", err)
		require.Equal(t, 1, in.Count())
		resp := submitOne(t, client, "cut-before-submit", "cut before submit")
		require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED, resp.GetOutcome())
	})

	// Engine faults: jobs queued first, then a worker whose connections
	// suffer the fault; every job must still end once.
	for _, tc := range []struct {
		name  string
		fault pgproxy.Fault
	}{
		{"ClaimCutAfterCommit", pgproxy.Fault{Statement: "JobClaim", Action: pgproxy.CutAfter}},
		{"ClaimCutBefore", pgproxy.Fault{Statement: "JobClaim", Action: pgproxy.CutBefore, Times: 3}},
		// An LLM answer's journal row and its checkpoint are one statement
		// (CheckpointWriteMany), and the completer publishes in batches
		// (JobPublishMany): docs/architecture.md, "The batched engine".
		{"CheckpointCutAfterCommit", pgproxy.Fault{Statement: "CheckpointWriteMany", Action: pgproxy.CutAfter, Times: 3}},
		{"CheckpointCutBefore", pgproxy.Fault{Statement: "CheckpointWriteMany", Action: pgproxy.CutBefore, Times: 3}},
		{"JournalCutAfterCommit", pgproxy.Fault{Statement: "CheckpointWriteMany", Action: pgproxy.CutAfter, Times: 2}},
		{"PublishCutAfterCommit", pgproxy.Fault{Statement: "JobPublishMany", Action: pgproxy.CutAfter, Times: 2}},
		{"PublishCutBefore", pgproxy.Fault{Statement: "JobPublishMany", Action: pgproxy.CutBefore, Times: 2}},
		{"PublishStalled", pgproxy.Fault{Statement: "JobPublishMany", Action: pgproxy.StallBefore, Duration: 1500 * time.Millisecond}},
		{"HeartbeatCut", pgproxy.Fault{Statement: "JobHeartbeatMany", Action: pgproxy.CutBefore, Times: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fault.Statement == "JobHeartbeatMany" {
				// Jobs that run long enough to heartbeat (every lease/3).
				e.sim.setFaults(t, `{"latency": "400ms"}`)
				defer e.sim.setFaults(t, `{}`)
			}
			e.submit(t, client, tc.name, 4)
			p := e.proxy(t)
			in := p.Inject(tc.fault)
			w := e.worker(t, "worker", p, 2)
			waitFired(t, in)
			all := e.allJobs(t)
			e.waitEnded(t, all)
			w.stop()
			e.requireOnce(t, all)
			if tc.fault.Statement == "JobClaim" && tc.fault.Action == pgproxy.CutAfter {
				require.Positive(t, e.lostClaims(t, all), "no job shows the claim whose answer was cut")
			}
		})
	}

	t.Run("StalledCommitHoldsTheJob", func(t *testing.T) {
		// Worker A's publish ran and holds the job's row, its commit held
		// back past A's lease. Worker B must not take the job over
		// meanwhile: the row lock fences it out, and A's commit lands. The
		// stall lasts until the test has seen the lock held, the lease
		// expired and B claim twice after that, and is then released: a
		// fixed stall could end before a loaded machine got that far
		// (docs/architecture.md, "Database faults and readiness").
		id := e.submit(t, client, "stalled-commit", 1)[0]
		pa := e.proxy(t)
		in := pa.Inject(pgproxy.Fault{Statement: "JobPublishMany", Action: pgproxy.StallCommit, Duration: time.Minute})
		defer in.Release()
		a := e.worker(t, "worker-a", pa, 1)
		waitFired(t, in)
		// B starts once the publish holds the row: before that, on a
		// machine slow to run it, B could take over a lease A's late
		// heartbeats let expire, and A's publish would then be fenced out.
		e.waitRowLockedPastLease(t, id)
		pb := e.proxy(t)
		b := e.worker(t, "worker-b", pb, 1)
		e.waitClaimsPassedOver(t, pb, id)
		in.Release()
		e.waitEnded(t, []string{id})
		a.stop()
		b.stop()
		e.requireOnce(t, e.allJobs(t))
		j, err := e.db.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: "default", ID: id})
		require.NoError(t, err)
		require.EqualValues(t, 1, j.Attempt, "B took the job over while A's commit held it; the job's log:\n%s", strings.Join(storeEvents(t, e.db, id), "\n"))
	})

	t.Run("PartitionedWorkerIsFencedOut", func(t *testing.T) {
		// Worker A is cut off from the database as it sends its publish,
		// past its lease; B takes the job over. When the partition heals,
		// A's publish reaches the database and must be refused by the
		// fence. The partition lasts until the test has seen B's claim,
		// and is then released: a fixed one could end before a loaded
		// machine started B, and A's publish would land.
		id := e.submit(t, client, "partitioned", 1)[0]
		pa := e.proxy(t)
		in := pa.Inject(pgproxy.Fault{Statement: "JobPublishMany", Action: pgproxy.Partition, Duration: time.Minute})
		defer in.Release()
		a := e.worker(t, "worker-a", pa, 1)
		waitFired(t, in)
		b := e.worker(t, "worker-b", e.proxy(t), 1)
		require.Eventually(t, func() bool {
			j, err := e.db.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: "default", ID: id})
			return err == nil && j.Attempt >= 2
		}, 60*time.Second, 20*time.Millisecond, "B never took the job over")
		in.Release()
		e.waitEnded(t, []string{id})
		require.Eventually(t, func() bool { return strings.Contains(a.logs.String(), "lease lost") }, 60*time.Second, 50*time.Millisecond,
			"A's late publish was not refused")
		a.stop()
		b.stop()
		e.requireOnce(t, e.allJobs(t))
		j, err := e.db.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: "default", ID: id})
		require.NoError(t, err)
		require.GreaterOrEqual(t, j.Attempt, int32(2), "B took the job over")
	})

	t.Run("WatchCutAndStalled", func(t *testing.T) {
		// Watches of running jobs lose their reads (cut after the read ran)
		// and then the whole API's database for a while; each resumes from
		// its last seq and sees every event once.
		e.sim.setFaults(t, `{"latency": "300ms"}`)
		defer e.sim.setFaults(t, `{}`)
		ids := e.submit(t, client, "watch-cut", 4)
		watches := map[string]<-chan watchResult{}
		for _, id := range ids {
			watches[id] = resumingWatch(client, id, 90*time.Second)
		}
		in := apiProxy.Inject(pgproxy.Fault{Statement: "JobEventList", Action: pgproxy.CutAfter, Times: 4})
		w := e.worker(t, "worker", e.proxy(t), 2)
		waitFired(t, in)
		release := apiProxy.Stall()
		time.Sleep(1500 * time.Millisecond)
		release()
		require.Positive(t, apiProxy.CutAll(), "and then every connection cut, the LISTEN one too")
		e.waitEnded(t, ids)
		w.stop()
		resumed := e.requireWatchesSawTheLog(t, watches, time.Time{})
		require.Positive(t, resumed, "no watch had to resume")
		e.requireOnce(t, e.allJobs(t))
	})

	t.Run("StalledStoreAnswersByTheDeadline", func(t *testing.T) {
		// A database that stops answering (a partition that drops nothing):
		// calls end by their deadline, readiness goes NOT_SERVING, liveness
		// stays; after it heals the service serves again.
		health := pollHealth(t, addr)
		release := apiProxy.Stall()
		health.waitReady(t, healthpb.HealthCheckResponse_NOT_SERVING)
		for i := range 2 {
			cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, "idempotency-key", "stalled-"+strconv.Itoa(i)), callDeadline)
			_, err := client.SubmitJob(cctx, &oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "stalled"}}})
			cancel()
			requireOutageAnswer(t, err)
		}
		// A caller without a deadline is answered by the server's own
		// bound (the store timeout): store unavailable, not a hang. The
		// guard is a hang's, not a measure of the bound: a deadline of the
		// caller's would reach the server and be the bound.
		answered := make(chan error, 1)
		go func() {
			_, err := client.GetJob(ctx, &oncejobv1.GetJobRequest{JobId: "01a23b3e-0000-7000-8000-000000000000"})
			answered <- err
		}()
		select {
		case err := <-answered:
			require.True(t, storeUnavailable(err), "a call without a deadline on a stalled store: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("a call without a deadline on a stalled store hung")
		}
		release()
		health.waitReady(t, healthpb.HealthCheckResponse_SERVING)
		_, liveness := health.stop()
		require.Empty(t, liveness)
		submitOne(t, client, "after-the-stall", "after the stall")
	})

	t.Run("SlowStoreUnderLoad", func(t *testing.T) {
		apiProxy.SetLatency(10 * time.Millisecond)
		defer apiProxy.SetLatency(0)
		wp := e.proxy(t)
		wp.SetLatency(10 * time.Millisecond)
		w := e.worker(t, "worker", wp, 2)
		load := startSubmitters(t, client, 2, "slow", 100*time.Millisecond)
		time.Sleep(time.Second)
		acked, _ := load.stop()
		require.NotEmpty(t, acked)
		all := e.allJobs(t)
		for _, id := range acked {
			require.Contains(t, all, id)
		}
		e.waitEnded(t, all)
		w.stop()
		e.requireOnce(t, all)
	})

	api.stop()
	requireServerAnswered(t, api)
}
