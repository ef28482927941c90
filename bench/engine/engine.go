package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bojand/ghz/runner"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

type engineBench struct {
	c          config
	bin        string
	tmp        string
	pipelines  string
	admin      *pgx.Conn
	simURL     string
	stats      []stmtStats
	lastCPU    cpuUse
	simPID     int
	postmaster int
	// appUser, if set, is the role the oncejob processes and River's
	// working pool connect as (the account tells their statements from
	// the bench's own by it); afterSubmit, if set, runs in prepare once
	// the measured jobs are submitted and serve stopped, before the
	// database settles.
	appUser     string
	afterSubmit func(context.Context) error
	// system is the name of the engine's results: sysEngine, or
	// "oncejob @<dir>" for a -before tree's binary.
	system string
	// befores are the same bench for the -before trees' binaries.
	befores []*engineBench
}

// engines are the benches of the engine phases, in the order they run: the
// -before trees' first.
func (e *engineBench) engines() []*engineBench {
	return append(append([]*engineBench(nil), e.befores...), e)
}

// sys is the name of the engine's results.
func (e *engineBench) sys() string {
	if e.system == "" {
		return sysEngine
	}
	return e.system
}

// appURL is the URL of database db for the measured processes: the -pg
// server, as e.appUser when set.
func (e *engineBench) appURL(db string) string {
	u, err := url.Parse(e.c.pgURL)
	if err != nil || e.appUser == "" {
		return e.c.pgURL + "/" + db + "?sslmode=disable"
	}
	u.User = url.User(e.appUser)
	u.Path = "/" + db
	u.RawQuery = "sslmode=disable"
	return u.String()
}

// stmtStats is what Postgres counted during one measured engine phase.
type stmtStats struct {
	scenario   string
	system     string
	processes  int
	jobs       int
	commits    int64 // transactions committed in the database (each engine statement is one)
	rowsIns    int64
	rowsUpd    int64
	walBytes   int64
	walRecords int64
	cpu        cpuUse
}

// prepared is a fresh database with a queue of jobs waiting, the tables
// vacuumed and analyzed, and the simulator reset.
type prepared struct {
	pool        *pgxpool.Pool
	callsBefore int64 // LLM calls journaled by the warmup
}

// prepare recreates the database, fills the queue with sc.jobs jobs
// through SubmitJob (after -warmup-jobs run by procs worker processes), and
// settles the tables. beforeSubmit, if set, runs once the warmup is done,
// on an empty queue. The caller closes p.pool.
func (e *engineBench) prepare(ctx context.Context, tag string, sc scenario, procs int, beforeSubmit func(*pgxpool.Pool) error) (*prepared, error) {
	c := e.c
	if err := recreateDB(ctx, e.admin, c.db); err != nil {
		return nil, err
	}
	dbURL := c.pgURL + "/" + c.db + "?sslmode=disable"
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			pool.Close()
		}
	}()

	// The queue is filled through the API; serve runs no workers and is
	// stopped before the measured run.
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	srv, err := startProc(ctx, "serve", filepath.Join(e.tmp, "serve-"+tag+".log"), e.bin, "serve",
		"--database-url", e.appURL(c.db), "--migrate", "--workers", "0", "--grpc-addr", addr, "--http-addr", "",
		"--pipelines", e.pipelines, "--log-level", c.logLevel)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	if err := waitListen(ctx, srv, addr); err != nil {
		return nil, err
	}
	if err := setSimLatency(ctx, e.simURL, c.simLatency); err != nil {
		return nil, err
	}

	if err := e.history(ctx, pool, tag, addr, sc, procs); err != nil {
		return nil, err
	}
	if beforeSubmit != nil {
		if err := beforeSubmit(pool); err != nil {
			return nil, err
		}
	}

	logf("%s: submitting %d jobs (pipeline %s, SubmitJob -c %d, workers stopped)", tag, sc.jobs, sc.pipeline, c.submitC)
	start := time.Now()
	err = submit(ctx, c.root, addr, c.submitC, sc, sc.jobs)
	srv.stop()
	if err != nil {
		return nil, err
	}
	logf("%s: submitted in %s", tag, time.Since(start).Round(time.Millisecond))
	if e.afterSubmit != nil {
		if err := e.afterSubmit(ctx); err != nil {
			return nil, err
		}
	}

	if err := e.readyToRun(ctx, pool, sc.jobs); err != nil {
		return nil, err
	}
	p := &prepared{pool: pool}
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(llm_calls), 0) FROM jobs`).Scan(&p.callsBefore); err != nil {
		return nil, err
	}
	ok = true
	return p, nil
}

// history gives the database a past before the measured jobs: -history
// succeeded jobs inserted by SQL, then -warmup-jobs run by procs worker
// processes through the server at addr.
func (e *engineBench) history(ctx context.Context, pool *pgxpool.Pool, tag, addr string, sc scenario, procs int) error {
	c := e.c
	if c.history > 0 {
		logf("%s: history: %d succeeded jobs inserted by SQL", tag, c.history)
		if _, err := pool.Exec(ctx, historySQL, c.history); err != nil {
			return fmt.Errorf("history: %w", err)
		}
	}
	if c.warmupJobs > 0 {
		// History, as a running deployment has: the measured run starts on
		// analyzed tables that hold rows of every kind.
		logf("%s: warmup: %d jobs through the workers (not measured)", tag, c.warmupJobs)
		if err := submit(ctx, c.root, addr, c.submitC, sc, c.warmupJobs); err != nil {
			return err
		}
		if _, _, err := e.runWorkers(ctx, pool, workerRun{tag: tag + "-warmup", procs: procs, workers: c.workers, total: c.warmupJobs}); err != nil {
			return fmt.Errorf("warmup: %w", err)
		}
	}
	return nil
}

// checkCalls checks that the measured jobs made exactly want LLM calls, as
// journaled in the database and as billed by the simulator: no chunk was
// deduplicated or served from the decision cache, and none ran twice.
// readyToRun checks that the n submitted jobs are all queued, then lets the
// database settle and resets the simulator for the measured run.
func (e *engineBench) readyToRun(ctx context.Context, pool *pgxpool.Pool, n int) error {
	var queued int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'queued'`).Scan(&queued); err != nil {
		return err
	}
	if queued != n {
		return fmt.Errorf("%d jobs queued after submitting %d", queued, n)
	}
	if err := settle(ctx, pool); err != nil {
		return err
	}
	if err := httpPost(ctx, e.simURL+"/oncejob/reset", ""); err != nil {
		return fmt.Errorf("reset simulator: %w", err)
	}
	return nil
}

func (e *engineBench) checkCalls(ctx context.Context, q querier, callsBefore, want int64) error {
	var calls int64
	if err := q.QueryRow(ctx, `SELECT coalesce(sum(llm_calls), 0) FROM jobs`).Scan(&calls); err != nil {
		return err
	}
	calls -= callsBefore
	billed, err := simBilled(ctx, e.simURL)
	if err != nil {
		return err
	}
	if calls != want || billed != want {
		return fmt.Errorf("%d LLM calls journaled and %d billed by the simulator, want %d each (a chunk count or the decision cache is off)", calls, billed, want)
	}
	// Every succeeded job announced its success: one outbox event each.
	var jobs, events int64
	if err := q.QueryRow(ctx, `SELECT (SELECT count(*) FROM jobs WHERE status = 'succeeded'),
		(SELECT count(*) FROM outbox WHERE event_type = 'job.succeeded')`).Scan(&jobs, &events); err != nil {
		return err
	}
	if events != jobs {
		return fmt.Errorf("%d job.succeeded events in the outbox for %d succeeded jobs", events, jobs)
	}
	return nil
}

func (e *engineBench) phase(ctx context.Context, sc scenario, procs int) (result, error) {
	c := e.c
	tag := fmt.Sprintf("%s-%dp", sc.name, procs)
	p, err := e.prepare(ctx, tag, sc, procs, nil)
	if err != nil {
		return result{}, err
	}
	pool := p.pool
	defer pool.Close()
	before, err := dbCounters(ctx, pool)
	if err != nil {
		return result{}, err
	}

	logf("%s: starting %d worker process(es), --workers %d each", tag, procs, c.workers)
	waits := startWaitSampler(ctx, c.pgURL, c.db)
	elapsed, _, err := e.runWorkers(ctx, pool, workerRun{tag: tag, procs: procs, workers: c.workers, total: c.warmupJobs + sc.jobs})
	waitDesc := waits.finish()
	if err != nil {
		return result{}, err
	}

	after, err := dbCounters(ctx, pool)
	if err != nil {
		return result{}, err
	}
	if err := e.checkCalls(ctx, pool, p.callsBefore, int64(sc.jobs*sc.chunks)); err != nil {
		return result{}, err
	}
	e.stats = append(e.stats, stmtStats{
		scenario: sc.name, system: e.sys(), processes: procs, jobs: sc.jobs,
		commits:    after.commits - before.commits,
		rowsIns:    after.rowsIns - before.rowsIns,
		rowsUpd:    after.rowsUpd - before.rowsUpd,
		walBytes:   after.walBytes - before.walBytes,
		walRecords: after.walRecords - before.walRecords,
		cpu:        e.lastCPU,
	})
	r := result{scenario: sc.name, system: e.sys(), processes: procs, jobs: sc.jobs, elapsed: elapsed,
		rate: float64(sc.jobs) / elapsed.Seconds(), waits: waitDesc, pgCPU: e.lastCPU.postgres}
	logf("%s: %d jobs in %s: %.0f jobs/s", tag, sc.jobs, elapsed.Round(time.Millisecond), r.rate)
	return r, nil
}

// workerRun is one run of `oncejob worker` processes until total jobs of
// the database have succeeded.
type workerRun struct {
	tag     string
	procs   int
	workers int           // --workers of each process
	url     string        // --database-url; empty: the pool's
	lease   time.Duration // --lease-duration; 0: -lease-duration
	env     []string      // added to each process's environment
	total   int           // succeeded jobs that end the run
	// poll, if set, is called after every poll of the database with the
	// worker processes and the numbers of jobs running and queued.
	poll func(workers []*proc, running, queued int)
}

// querier is a *pgxpool.Pool or a *pgx.Conn.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// runWorkers starts the worker processes of wr and returns the time from
// their start to the commit of the last job once wr.total jobs have
// succeeded, and the number of queries it sent to q; it stops them before
// returning.
func (e *engineBench) runWorkers(ctx context.Context, q querier, wr workerRun) (time.Duration, int, error) {
	c := e.c
	workerURL := wr.url
	if workerURL == "" {
		workerURL = e.appURL(c.db)
	}
	if c.poolMaxConns > 0 {
		workerURL += "&pool_max_conns=" + strconv.Itoa(c.poolMaxConns)
	}
	lease := wr.lease
	if lease == 0 {
		lease = c.leaseDuration
	}
	queries := 0
	cpu0 := readCPU()
	pg0, sim0 := e.pgCPU(ctx), procCPU(e.simPID)
	t0 := time.Now()
	var workers []*proc
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	for i := range wr.procs {
		args := append([]string{"worker",
			"--database-url", workerURL, "--pipelines", e.pipelines,
			"--llm-base-url", e.simURL + "/v1", "--llm-lookup-path", "/oncejob/calls",
			"--poll-interval", c.pollInterval.String(),
			"--lease-duration", lease.String(), "--log-level", c.logLevel},
			workersArgs(wr.workers)...)
		args = append(args, c.workerArgs...)
		w, err := startProcEnv(ctx, "worker", filepath.Join(e.tmp, fmt.Sprintf("worker-%s-%d.log", wr.tag, i)), wr.env, e.bin, args...)
		if err != nil {
			return 0, queries, err
		}
		workers = append(workers, w)
	}

	if err := e.waitDone(ctx, q, wr, workers, &queries); err != nil {
		return 0, queries, err
	}
	detected := time.Now()
	// The last job's own commit time, not the poll's: finished_at is now()
	// of the publishing transaction, on this machine's clock.
	var last time.Time
	queries++
	if err := q.QueryRow(ctx, `SELECT max(finished_at) FROM jobs`).Scan(&last); err != nil {
		return 0, queries, err
	}
	end := last
	if end.Before(t0) || end.After(detected) {
		end = detected
	}
	cpu1 := readCPU()
	var workerCPU time.Duration
	for _, w := range workers {
		w.stop()
		if st := w.cmd.ProcessState; st != nil {
			workerCPU += st.UserTime() + st.SystemTime()
		}
	}
	workers = nil
	time.Sleep(200 * time.Millisecond) // the workers' backends exit, into the postmaster's cutime
	e.lastCPU = cpuUse{
		machineBusy: cpu1.busy - cpu0.busy, machineTotal: cpu1.total - cpu0.total,
		wall: detected.Sub(t0), workers: workerCPU,
		postgres: e.pgCPU(ctx) - pg0, sim: procCPU(e.simPID) - sim0,
	}
	return end.Sub(t0), queries, nil
}

// cpuUse is where the CPU went during a measured run.
type cpuUse struct {
	machineBusy, machineTotal float64       // jiffies over all CPUs, /proc/stat
	wall                      time.Duration // start to detection
	workers                   time.Duration // user+sys of the worker processes (whole life)
	postgres                  time.Duration // every Postgres process, exited backends included (0 if not local)
	sim                       time.Duration // the LLM simulator
}

// pgCPU is the CPU time of the local Postgres server: its postmaster's
// reaped children (exited backends) plus its live children. Zero when the
// server is not on this machine.
// waitDone polls q until wr.total jobs have succeeded, counting its queries
// in *queries; it fails when a job ends otherwise, a worker exits, ctx ends or
// the phase times out.
func (e *engineBench) waitDone(ctx context.Context, q querier, wr workerRun, workers []*proc, queries *int) error {
	deadline := time.NewTimer(e.c.phaseTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		// Index-only scans of jobs_tenant_status_created_idx: the poll
		// costs the database little while the workers run.
		var done, bad, running, queued int
		*queries++
		if err := q.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM jobs WHERE tenant = 'default' AND status = 'succeeded'),
			(SELECT count(*) FROM jobs WHERE tenant = 'default'
				AND status IN ('failed', 'dead_lettered', 'cancelled', 'outcome_unknown', 'awaiting_approval')),
			(SELECT count(*) FROM jobs WHERE tenant = 'default' AND status = 'running'),
			(SELECT count(*) FROM jobs WHERE tenant = 'default' AND status = 'queued')`).Scan(&done, &bad, &running, &queued); err != nil {
			return err
		}
		if bad > 0 {
			return fmt.Errorf("%d jobs ended other than succeeded (see the worker logs with -keep)", bad)
		}
		if wr.poll != nil {
			wr.poll(workers, running, queued)
		}
		if done == wr.total {
			return nil
		}
		for _, w := range workers {
			if w.exited() {
				return fmt.Errorf("worker exited: %s", w.tail())
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%d of %d succeeded after %s", done, wr.total, e.c.phaseTimeout)
		case <-tick.C:
		}
	}
}

func (e *engineBench) pgCPU(ctx context.Context) time.Duration {
	if e.postmaster == 0 {
		var backend int
		if err := e.admin.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
			return 0
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", backend))
		if err != nil {
			return 0
		}
		for _, line := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(line, "PPid:"); ok {
				e.postmaster, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if e.postmaster == 0 {
			return 0
		}
	}
	f := statFields(e.postmaster)
	if f == nil {
		return 0
	}
	total := jiffies(f[15]) + jiffies(f[16]) // cutime, cstime
	children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", e.postmaster, e.postmaster))
	for _, c := range strings.Fields(string(children)) {
		pid, _ := strconv.Atoi(c)
		total += procCPU(pid)
	}
	return total
}

// procCPU is a live process's user+system time.
func procCPU(pid int) time.Duration {
	f := statFields(pid)
	if f == nil {
		return 0
	}
	return jiffies(f[13]) + jiffies(f[14])
}

// statFields are the fields of /proc/pid/stat, numbered as in proc(5) less
// one (f[13] is utime).
func statFields(pid int) []string {
	if pid <= 0 {
		return nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')') // comm may hold spaces
	if i < 0 {
		return nil
	}
	return append([]string{"pid", "comm"}, strings.Fields(string(b[i+1:]))...)
}

// jiffies converts clock ticks (USER_HZ, 100 on Linux) to a duration.
func jiffies(s string) time.Duration {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Duration(n) * 10 * time.Millisecond
}

type cpuSample struct{ busy, total float64 }

// readCPU reads the machine's CPU counters (all CPUs, jiffies).
func readCPU() cpuSample {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var s cpuSample
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		s.total += n
		if i != 3 && i != 4 { // idle, iowait
			s.busy += n
		}
	}
	return s
}

type counters struct {
	commits, rowsIns, rowsUpd, walBytes, walRecords int64
}

// dbCounters reads the database's commit and row counters and the server's
// WAL totals. The statistics are flushed by backends at most once a second
// (and at exit), so it is read after the workers stopped and a pause.
func dbCounters(ctx context.Context, pool *pgxpool.Pool) (counters, error) {
	time.Sleep(1100 * time.Millisecond)
	var c counters
	err := pool.QueryRow(ctx, `SELECT d.xact_commit, d.tup_inserted, d.tup_updated,
			w.wal_bytes::bigint, w.wal_records
		FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = current_database()`).
		Scan(&c.commits, &c.rowsIns, &c.rowsUpd, &c.walBytes, &c.walRecords)
	return c, err
}

// settle vacuums and checkpoints, so each measured phase starts from the
// same state of tables and WAL (riverbench vacuums its table too).
func settle(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, `CHECKPOINT`)
	return err
}

func recreateDB(ctx context.Context, admin *pgx.Conn, db string) error {
	if _, err := admin.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, db)); err != nil {
		return err
	}
	_, err := admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %q`, db))
	return err
}

// submit fills the queue with sc.jobs jobs through SubmitJob, a new key and
// a different document per call.
func submit(ctx context.Context, root, addr string, conc uint, sc scenario, n int) error {
	body, _ := json.Marshal(map[string]any{
		"pipeline": sc.pipeline,
		"document": map[string]any{"text": sc.text},
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	rep, err := runner.Run(submitCall, addr,
		runner.WithProtoFile(filepath.Join(root, "proto/oncejob/v1/job.proto"),
			[]string{filepath.Join(root, "proto"), filepath.Join(root, "third_party/googleapis")}),
		runner.WithInsecure(true),
		runner.WithConcurrency(conc),
		runner.WithTotalRequests(uint(n)),
		runner.WithDataFromJSON(string(body)),
		runner.WithMetadataFromJSON(`{"idempotency-key":"bench-{{.UUID}}"}`),
		runner.WithTimeout(30*time.Second),
	)
	if err != nil {
		return fmt.Errorf("ghz: %w", err)
	}
	var bad []string
	for code, n := range rep.StatusCodeDist {
		if code != "OK" {
			bad = append(bad, fmt.Sprintf("%s=%d", code, n))
		}
	}
	for msg, n := range rep.ErrorDist {
		bad = append(bad, fmt.Sprintf("%q x%d", msg, n))
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("SubmitJob errors: %s", strings.Join(bad, ", "))
	}
	return nil
}

// workersArgs is --workers n, or nothing for n <= 0: the binary's default.
func workersArgs(n int) []string {
	if n <= 0 {
		return nil
	}
	return []string{"--workers", strconv.Itoa(n)}
}

// historySQL inserts $1 succeeded jobs of tenant history and what a light
// job leaves: a document, its LLM checkpoint, a journal row, two events and,
// by the trigger jobs_announce, an outbox row each (-history).
const historySQL = `WITH job AS (
    INSERT INTO jobs (id, tenant, idempotency_key, dedup_key, pipeline, pipeline_version, status, stage, attempt,
        document_sha256, document_media_type, document_size_bytes, output, finished_at, llm_calls)
    SELECT gen_random_uuid(), 'history', 'history-' || g, md5('dedup' || g), 'light', 1, 'succeeded', 'published', 1,
        md5('doc' || g), 'text/plain', 40, '{"summary": "history"}', now(), 0
    FROM generate_series(1, $1::integer) AS g
    RETURNING id, tenant, document_sha256
),
doc AS (
    INSERT INTO documents (tenant, sha256, media_type, size_bytes, data)
    SELECT tenant, document_sha256, 'text/plain', 40, '\x00' FROM job
),
checkpoint AS (
    INSERT INTO job_checkpoints (job_id, tenant, stage, chunk, stage_key, code_version, attempt, output)
    SELECT id, tenant, 'llm_done', 0, md5('stage' || id::text), 'v1', 1, '\x00' FROM job
),
attempt AS (
    INSERT INTO llm_attempts (job_id, tenant, job_attempt, stage, chunk, provider_key, outcome, billed, provider_request_id)
    SELECT id, tenant, 1, 'llm_done', 0, md5('key' || id::text), 'succeeded', true, 'req-' || id::text FROM job
)
INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt)
SELECT id, tenant, s, 'running', 'uploaded', 1 FROM job, generate_series(1, 2) AS s`
