// Command engine measures oncejob's engine, jobs per second from queued to
// SUCCEEDED, against River working no-op jobs on the same Postgres.
//
// One run, phases strictly one after another on a fresh database each:
//
//   - for each scenario (light: a one-chunk document and the trivial schema
//     {type: object}; realistic: a ~7,400-character document that splits
//     into four chunks and a schema with required properties), and for each
//     number of worker processes (-processes, default 1 and 2): N jobs are
//     submitted through SubmitJob (gRPC, ghz) with the workers stopped, then
//     the `oncejob worker` processes start and the clock runs until the last
//     job is SUCCEEDED. The LLM is `oncejob llm-sim` at zero latency; every
//     document is different in every chunk, so neither the dedup key nor
//     the decision cache saves any work;
//   - River (github.com/riverqueue/river with riverpgxv5), in this process,
//     with the client settings of River's own benchmark (cmd/river/riverbench:
//     FetchCooldown 2ms, FetchPollInterval 20ms, MaxWorkers 2,000, pgxpool
//     defaults): the same N no-op jobs inserted with InsertMany, then the
//     client starts and the clock runs until the last completion event.
//
// jobs/s = N / (time from the start of the workers to the last job done).
//
//	cd bench && go run ./engine            # defaults: 2,000 light, 500 realistic
//	cd bench && go run ./engine -h         # every knob
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/bojand/ghz/runner"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

const (
	rootModule = "github.com/oncejob/oncejob"
	submitCall = "oncejob.v1.JobService.SubmitJob"
)

// pipelinesYAML are the two pipelines measured. light is the least the
// engine does for a job: one chunk, one call, a schema any object passes.
// realistic chunks a document of ~7,400 characters into four calls and
// validates their merged output against a schema with required properties.
const pipelinesYAML = `pipelines:
  - name: light
    version: 1
    prompt: {version: "1", template: "{{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object}
  - name: realistic
    version: 1
    prompt: {version: "1", template: "Summarize part {{.Chunk}} of {{.Chunks}}:\n\n{{.Text}}"}
    model_profiles: [default]
    output_schema:
      type: object
      required: [summary, key_points]
      properties:
        summary: {type: string}
        key_points: {type: array, items: {type: string}}
    chunking: {size: 2000, overlap: 100}
`

type scenario struct {
	name     string
	pipeline string
	chunks   int    // LLM calls per job
	text     string // ghz data template; {{.UUID}} makes each document (and chunk) unique
	jobs     int
}

type config struct {
	root             string
	pgURL            string
	db               string
	riverDB          string
	lightJobs        int
	realisticJobs    int
	scenarios        string
	processes        string
	workers          int
	poolMaxConns     int
	pollInterval     time.Duration
	leaseDuration    time.Duration
	simLatency       time.Duration
	submitC          uint
	riverMaxWorkers  int
	riverSteadyJobs  int
	warmupJobs       int
	phaseTimeout     time.Duration
	logLevel         string
	target           float64
	strict           bool
	keep             bool
	statementsReport bool
}

func main() {
	var c config
	flag.StringVar(&c.root, "root", "", "oncejob repository root (default: found from the working directory upwards)")
	flag.StringVar(&c.pgURL, "pg", envOr("BENCH_PG", "postgres://postgres@127.0.0.1:5432"), "Postgres server URL without database (env BENCH_PG)")
	flag.StringVar(&c.db, "db", "oncejob_bench_engine", "throwaway database of the engine, dropped and recreated for every phase")
	flag.StringVar(&c.riverDB, "river-db", "oncejob_bench_river", "throwaway database of River, dropped and recreated for every phase")
	flag.IntVar(&c.lightJobs, "light-jobs", 2000, "jobs per phase of the light scenario (River works as many)")
	flag.IntVar(&c.realisticJobs, "realistic-jobs", 500, "jobs per phase of the realistic scenario (River works as many)")
	flag.StringVar(&c.scenarios, "scenarios", "light,realistic", "scenarios to run, comma-separated")
	flag.StringVar(&c.processes, "processes", "1,2", "numbers of `oncejob worker` processes, one phase each, comma-separated")
	flag.IntVar(&c.workers, "workers", 32, "--workers of each engine process (jobs run at once per process)")
	flag.IntVar(&c.poolMaxConns, "pool-max-conns", 0, "if > 0, pool_max_conns=N on each worker's --database-url (pgx default: max(4, GOMAXPROCS), as River's pool here)")
	flag.DurationVar(&c.pollInterval, "poll-interval", 20*time.Millisecond, "--poll-interval of the workers (River's FetchPollInterval is 20ms)")
	flag.DurationVar(&c.leaseDuration, "lease-duration", 30*time.Second, "--lease-duration of the workers")
	flag.DurationVar(&c.simLatency, "sim-latency", 0, "latency of every simulated LLM call")
	flag.UintVar(&c.submitC, "submit-c", 32, "concurrency of the SubmitJob calls that fill the queue (not measured)")
	flag.IntVar(&c.riverMaxWorkers, "river-max-workers", 2000, "River's MaxWorkers (riverbench: 2,000)")
	flag.IntVar(&c.riverSteadyJobs, "river-steady-jobs", 20000, "if > 0, one more River phase with this many jobs, its throughput once fetch latency is amortised (reference)")
	flag.IntVar(&c.warmupJobs, "warmup-jobs", 200, "jobs the workers run before each measured engine phase, then VACUUM ANALYZE: the measured run starts on tables with history and statistics (0: a fresh database)")
	flag.DurationVar(&c.phaseTimeout, "phase-timeout", 5*time.Minute, "fail a phase that has not finished by then")
	flag.StringVar(&c.logLevel, "log-level", "warn", "--log-level of the oncejob processes (their logs go to files in the temp dir)")
	flag.Float64Var(&c.target, "target", 0.3, "target ratio: light engine (best process count) / River")
	flag.BoolVar(&c.strict, "strict", false, "exit 1 if the target ratio is not met")
	flag.BoolVar(&c.keep, "keep", false, "keep the last databases and the temp dir (logs, pipelines file)")
	flag.BoolVar(&c.statementsReport, "statements", true, "count the engine's statements per job from pg_stat_database (commits) and pg_stat_user_tables")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench: FAIL:", err)
		os.Exit(1)
	}
}

type result struct {
	scenario  string
	system    string
	processes int
	jobs      int
	elapsed   time.Duration
	rate      float64
}

func run(ctx context.Context, c config) error {
	if c.root == "" {
		r, err := findRoot()
		if err != nil {
			return err
		}
		c.root = r
	}
	procs, err := intList(c.processes)
	if err != nil {
		return fmt.Errorf("-processes: %w", err)
	}
	var scenarios []scenario
	for _, name := range strings.Split(c.scenarios, ",") {
		switch strings.TrimSpace(name) {
		case "light":
			scenarios = append(scenarios, scenario{name: "light", pipeline: "light", chunks: 1, jobs: c.lightJobs,
				text: "{{.UUID}} a one-chunk document for the light pipeline"})
		case "realistic":
			scenarios = append(scenarios, scenario{name: "realistic", pipeline: "realistic", chunks: 4, jobs: c.realisticJobs,
				text: realisticText()})
		default:
			return fmt.Errorf("-scenarios: unknown %q (light, realistic)", name)
		}
	}

	tmp, err := os.MkdirTemp("", "oncejob-bench-engine-")
	if err != nil {
		return err
	}
	if c.keep {
		logf("temp dir %s (kept)", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	pipelinesPath := filepath.Join(tmp, "pipelines.yaml")
	if err := os.WriteFile(pipelinesPath, []byte(pipelinesYAML), 0o644); err != nil {
		return err
	}

	logf("building oncejob from %s", c.root)
	bin := filepath.Join(tmp, "oncejob")
	if err := cmdRun(ctx, c.root, "go", "build", "-o", bin, "./cmd/oncejob"); err != nil {
		return fmt.Errorf("build: %w", err)
	}

	admin, err := pgx.Connect(ctx, c.pgURL+"/postgres?sslmode=disable")
	if err != nil {
		return fmt.Errorf("connect to %s: %w", c.pgURL, err)
	}
	defer admin.Close(context.Background())
	if !c.keep {
		defer func() {
			for _, db := range []string{c.db, c.riverDB} {
				_, _ = admin.Exec(context.Background(), fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, db))
			}
		}()
	}

	simAddr, err := freeAddr()
	if err != nil {
		return err
	}
	sim, err := startProc(ctx, "llm-sim", filepath.Join(tmp, "llm-sim.log"), bin, "llm-sim", "--addr", simAddr, "--log-level", c.logLevel)
	if err != nil {
		return err
	}
	defer sim.stop()
	if err := waitListen(ctx, sim, simAddr); err != nil {
		return err
	}
	simURL := "http://" + simAddr
	if err := httpPost(ctx, simURL+"/oncejob/faults", fmt.Sprintf(`{"latency":%q}`, c.simLatency.String())); err != nil {
		return fmt.Errorf("simulator latency: %w", err)
	}
	logf("llm-sim on %s, latency %s", simAddr, c.simLatency)

	e := &engineBench{c: c, bin: bin, tmp: tmp, pipelines: pipelinesPath, admin: admin, simURL: simURL, simPID: sim.cmd.Process.Pid}
	var results []result
	loadBefore := loadavg()
	for _, sc := range scenarios {
		for _, p := range procs {
			r, err := e.phase(ctx, sc, p)
			if err != nil {
				return fmt.Errorf("%s, %d process(es): %w", sc.name, p, err)
			}
			results = append(results, r)
		}
		r, err := riverPhase(ctx, c, admin, sc.name, sc.jobs)
		if err != nil {
			return fmt.Errorf("river, %s: %w", sc.name, err)
		}
		results = append(results, r)
	}
	if c.riverSteadyJobs > 0 {
		r, err := riverPhase(ctx, c, admin, "steady", c.riverSteadyJobs)
		if err != nil {
			return fmt.Errorf("river, steady: %w", err)
		}
		results = append(results, r)
	}
	loadAfter := loadavg()

	ratio := printResults(os.Stdout, c, results, e.stats)
	fmt.Printf("load average (1m) before/after: %s / %s on %d CPUs; every phase shares the machine with whatever else runs\n",
		loadBefore, loadAfter, runtime.NumCPU())
	if c.strict && ratio >= 0 && ratio < c.target {
		return fmt.Errorf("light engine is %.2fx River, target %.2fx", ratio, c.target)
	}
	return nil
}

// engineBench runs the engine's phases.
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
}

// stmtStats is what Postgres counted during one measured engine phase.
type stmtStats struct {
	scenario   string
	processes  int
	jobs       int
	commits    int64 // transactions committed in the database (each engine statement is one)
	rowsIns    int64
	rowsUpd    int64
	walBytes   int64
	walRecords int64
	cpu        cpuUse
}

func (e *engineBench) phase(ctx context.Context, sc scenario, procs int) (result, error) {
	c := e.c
	tag := fmt.Sprintf("%s-%dp", sc.name, procs)
	if err := recreateDB(ctx, e.admin, c.db); err != nil {
		return result{}, err
	}
	dbURL := c.pgURL + "/" + c.db + "?sslmode=disable"
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return result{}, err
	}
	defer pool.Close()

	// The queue is filled through the API; serve runs no workers and is
	// stopped before the measured run.
	addr, err := freeAddr()
	if err != nil {
		return result{}, err
	}
	srv, err := startProc(ctx, "serve", filepath.Join(e.tmp, "serve-"+tag+".log"), e.bin, "serve",
		"--database-url", dbURL, "--migrate", "--workers", "0", "--grpc-addr", addr, "--http-addr", "",
		"--pipelines", e.pipelines, "--log-level", c.logLevel)
	if err != nil {
		return result{}, err
	}
	defer srv.stop()
	if err := waitListen(ctx, srv, addr); err != nil {
		return result{}, err
	}

	if c.warmupJobs > 0 {
		// History, as a running deployment has: the measured run starts on
		// analyzed tables that hold rows of every kind.
		logf("%s: warmup: %d jobs through the workers (not measured)", tag, c.warmupJobs)
		if err := submit(ctx, c.root, addr, c.submitC, sc, c.warmupJobs); err != nil {
			return result{}, err
		}
		if _, err := e.runWorkers(ctx, pool, tag+"-warmup", procs, c.warmupJobs); err != nil {
			return result{}, fmt.Errorf("warmup: %w", err)
		}
	}

	logf("%s: submitting %d jobs (pipeline %s, SubmitJob -c %d, workers stopped)", tag, sc.jobs, sc.pipeline, c.submitC)
	start := time.Now()
	err = submit(ctx, c.root, addr, c.submitC, sc, sc.jobs)
	srv.stop()
	if err != nil {
		return result{}, err
	}
	logf("%s: submitted in %s", tag, time.Since(start).Round(time.Millisecond))

	var queued int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'queued'`).Scan(&queued); err != nil {
		return result{}, err
	}
	if queued != sc.jobs {
		return result{}, fmt.Errorf("%d jobs queued after submitting %d", queued, sc.jobs)
	}
	if err := settle(ctx, pool); err != nil {
		return result{}, err
	}
	if err := httpPost(ctx, e.simURL+"/oncejob/reset", ""); err != nil {
		return result{}, fmt.Errorf("reset simulator: %w", err)
	}
	if err := httpPost(ctx, e.simURL+"/oncejob/faults", fmt.Sprintf(`{"latency":%q}`, c.simLatency.String())); err != nil {
		return result{}, err
	}
	var callsBefore int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(llm_calls), 0) FROM jobs`).Scan(&callsBefore); err != nil {
		return result{}, err
	}
	before, err := dbCounters(ctx, pool)
	if err != nil {
		return result{}, err
	}

	logf("%s: starting %d worker process(es), --workers %d each", tag, procs, c.workers)
	elapsed, err := e.runWorkers(ctx, pool, tag, procs, c.warmupJobs+sc.jobs)
	if err != nil {
		return result{}, err
	}

	after, err := dbCounters(ctx, pool)
	if err != nil {
		return result{}, err
	}
	var calls int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(llm_calls), 0) FROM jobs`).Scan(&calls); err != nil {
		return result{}, err
	}
	calls -= callsBefore
	billed, err := simBilled(ctx, e.simURL)
	if err != nil {
		return result{}, err
	}
	if want := int64(sc.jobs * sc.chunks); calls != want || billed != want {
		return result{}, fmt.Errorf("%d LLM calls journaled and %d billed by the simulator, want %d each (a chunk count or the decision cache is off)", calls, billed, want)
	}
	e.stats = append(e.stats, stmtStats{
		scenario: sc.name, processes: procs, jobs: sc.jobs,
		commits:    after.commits - before.commits,
		rowsIns:    after.rowsIns - before.rowsIns,
		rowsUpd:    after.rowsUpd - before.rowsUpd,
		walBytes:   after.walBytes - before.walBytes,
		walRecords: after.walRecords - before.walRecords,
		cpu:        e.lastCPU,
	})
	r := result{scenario: sc.name, system: "oncejob engine", processes: procs, jobs: sc.jobs, elapsed: elapsed,
		rate: float64(sc.jobs) / elapsed.Seconds()}
	logf("%s: %d jobs in %s: %.0f jobs/s", tag, sc.jobs, elapsed.Round(time.Millisecond), r.rate)
	return r, nil
}

// runWorkers starts procs worker processes and returns the time from their
// start to the commit of the last job once total jobs have succeeded; it
// stops them before returning.
func (e *engineBench) runWorkers(ctx context.Context, pool *pgxpool.Pool, tag string, procs, total int) (time.Duration, error) {
	c := e.c
	workerURL := pool.Config().ConnString()
	if c.poolMaxConns > 0 {
		workerURL += "&pool_max_conns=" + strconv.Itoa(c.poolMaxConns)
	}
	cpu0 := readCPU()
	pg0, sim0 := e.pgCPU(ctx), procCPU(e.simPID)
	t0 := time.Now()
	var workers []*proc
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	for i := range procs {
		w, err := startProc(ctx, "worker", filepath.Join(e.tmp, fmt.Sprintf("worker-%s-%d.log", tag, i)), e.bin, "worker",
			"--database-url", workerURL, "--pipelines", e.pipelines,
			"--llm-base-url", e.simURL+"/v1", "--llm-lookup-path", "/oncejob/calls",
			"--workers", strconv.Itoa(c.workers), "--poll-interval", c.pollInterval.String(),
			"--lease-duration", c.leaseDuration.String(), "--log-level", c.logLevel)
		if err != nil {
			return 0, err
		}
		workers = append(workers, w)
	}

	deadline := time.NewTimer(c.phaseTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		// Index-only scans of jobs_tenant_status_created_idx: the poll
		// costs the database little while the workers run.
		var done, bad int
		if err := pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM jobs WHERE tenant = 'default' AND status = 'succeeded'),
			(SELECT count(*) FROM jobs WHERE tenant = 'default'
				AND status IN ('failed', 'dead_lettered', 'cancelled', 'outcome_unknown', 'awaiting_approval'))`).Scan(&done, &bad); err != nil {
			return 0, err
		}
		if bad > 0 {
			return 0, fmt.Errorf("%d jobs ended other than succeeded (see the worker logs with -keep)", bad)
		}
		if done == total {
			break
		}
		for _, w := range workers {
			if w.exited() {
				return 0, fmt.Errorf("worker exited: %s", w.tail())
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-deadline.C:
			return 0, fmt.Errorf("%d of %d succeeded after %s", done, total, c.phaseTimeout)
		case <-tick.C:
		}
	}
	detected := time.Now()
	// The last job's own commit time, not the poll's: finished_at is now()
	// of the publishing transaction, on this machine's clock.
	var last time.Time
	if err := pool.QueryRow(ctx, `SELECT max(finished_at) FROM jobs`).Scan(&last); err != nil {
		return 0, err
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
	return end.Sub(t0), nil
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

// realisticText is a ~7,400-character document of distinct words that the
// realistic pipeline (chunks of 2,000 with 100 overlap) splits into four;
// the per-job UUID stands every 36 words so that every chunk of every job
// differs, and no stage is served from the decision cache.
func realisticText() string {
	var b strings.Builder
	for i := 0; b.Len() < 7000; i++ {
		if i%36 == 0 {
			b.WriteString("{{.UUID}} ")
		}
		fmt.Fprintf(&b, "word%04d ", i)
	}
	return strings.TrimSpace(b.String())
}

// River.

// benchArgs and benchWorker are riverbench's BenchmarkArgs and
// BenchmarkWorker: a no-op job.
type benchArgs struct {
	Num int `json:"num"`
}

func (benchArgs) Kind() string { return "benchmark" }

type benchWorker struct {
	river.WorkerDefaults[benchArgs]
}

func (w *benchWorker) Work(ctx context.Context, j *river.Job[benchArgs]) error { return nil }

func riverPhase(ctx context.Context, c config, admin *pgx.Conn, name string, n int) (result, error) {
	if err := recreateDB(ctx, admin, c.riverDB); err != nil {
		return result{}, err
	}
	// As the river CLI opens its pool: pgxpool defaults.
	pool, err := pgxpool.New(ctx, c.pgURL+"/"+c.riverDB+"?sslmode=disable")
	if err != nil {
		return result{}, err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return result{}, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return result{}, fmt.Errorf("river migrate: %w", err)
	}

	workers := river.NewWorkers()
	river.AddWorker(workers, &benchWorker{})
	client, err := river.NewClient(driver, &river.Config{
		// cmd/river/riverbench's settings.
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: c.riverMaxWorkers}},
		Workers:           workers,
	})
	if err != nil {
		return result{}, err
	}
	events, cancelSub := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: max(n, 1000),
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancelSub()

	logf("river-%s: inserting %d no-op jobs (InsertMany, batches of 5,000)", name, n)
	for inserted := 0; inserted < n; {
		batch := make([]river.InsertManyParams, min(5000, n-inserted))
		for i := range batch {
			inserted++
			batch[i] = river.InsertManyParams{Args: benchArgs{Num: inserted}}
		}
		if _, err := client.InsertMany(ctx, batch); err != nil {
			return result{}, fmt.Errorf("river insert: %w", err)
		}
	}
	if err := settle(ctx, pool); err != nil {
		return result{}, err
	}

	logf("river-%s: starting the client, MaxWorkers %d", name, c.riverMaxWorkers)
	t0 := time.Now()
	if err := client.Start(ctx); err != nil {
		return result{}, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	}()
	deadline := time.NewTimer(c.phaseTimeout)
	defer deadline.Stop()
	var last time.Time
	for done := 0; done < n; {
		select {
		case <-ctx.Done():
			return result{}, ctx.Err()
		case <-deadline.C:
			return result{}, fmt.Errorf("%d of %d completed after %s", done, n, c.phaseTimeout)
		case ev := <-events:
			if ev == nil {
				return result{}, errors.New("river subscription closed")
			}
			if ev.Kind != river.EventKindJobCompleted {
				return result{}, fmt.Errorf("river job %d: %s", ev.Job.ID, ev.Kind)
			}
			last = time.Now()
			done++
		}
	}
	elapsed := last.Sub(t0)
	stopCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err = client.Stop(stopCtx)
	cancel()
	if err != nil {
		return result{}, fmt.Errorf("river stop: %w", err)
	}
	var completed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&completed); err != nil {
		return result{}, err
	}
	if completed != n {
		return result{}, fmt.Errorf("river: %d jobs completed in the table, want %d", completed, n)
	}
	r := result{scenario: name, system: "River (no-op)", processes: 1, jobs: n, elapsed: elapsed,
		rate: float64(n) / elapsed.Seconds()}
	logf("river-%s: %d jobs in %s: %.0f jobs/s", name, n, elapsed.Round(time.Millisecond), r.rate)
	return r, nil
}

// printResults prints the table and returns the light ratio of the best
// engine phase to River (-1 without a light scenario).
func printResults(w io.Writer, c config, rs []result, stats []stmtStats) float64 {
	fmt.Fprintf(w, "\nengine: `oncejob worker` x processes, --workers %d each, --poll-interval %s, pool_max_conns %s; simulator latency %s\n",
		c.workers, c.pollInterval, poolDesc(c.poolMaxConns), c.simLatency)
	fmt.Fprintf(w, "River %s: riverpgxv5, FetchCooldown 2ms, FetchPollInterval 20ms, MaxWorkers %d, pgxpool defaults, no-op jobs\n\n",
		riverVersion(), c.riverMaxWorkers)
	riverRate := map[string]float64{}
	for _, r := range rs {
		if r.system != "oncejob engine" {
			riverRate[r.scenario] = r.rate
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "scenario\t system\t processes\t jobs\t time\t jobs/s\t x River (same N)\t x River (steady)\t")
	for _, r := range rs {
		x, xs := "", ""
		if r.system == "oncejob engine" {
			x = fmt.Sprintf("%.3f", r.rate/riverRate[r.scenario])
			if s, ok := riverRate["steady"]; ok {
				xs = fmt.Sprintf("%.3f", r.rate/s)
			}
		}
		procs := strconv.Itoa(r.processes)
		if r.system != "oncejob engine" {
			procs = "in-process"
		}
		fmt.Fprintf(tw, "%s\t %s\t %s\t %d\t %s\t %.0f\t %s\t %s\t\n", r.scenario, r.system, procs, r.jobs,
			r.elapsed.Round(time.Millisecond), r.rate, x, xs)
	}
	tw.Flush()

	if c.statementsReport && len(stats) > 0 {
		fmt.Fprintf(w, "\nwhat Postgres counted per engine job (commits: one per engine statement, plus the bench's polls and autovacuum):\n\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
		fmt.Fprintln(tw, "scenario\t processes\t commits/job\t rows ins/job\t rows upd/job\t WAL rec/job\t WAL bytes/job\t machine busy\t CPU/job: worker\t postgres\t simulator\t rest of machine\t")
		for _, s := range stats {
			n := float64(s.jobs)
			busy := s.cpu.machineBusy / max(s.cpu.machineTotal, 1)
			// jiffies are 1/100 s on Linux (USER_HZ).
			machineCPU := time.Duration(s.cpu.machineBusy * float64(10*time.Millisecond))
			other := machineCPU - s.cpu.workers - s.cpu.postgres - s.cpu.sim
			per := func(d time.Duration) string { return (d / time.Duration(s.jobs)).Round(10 * time.Microsecond).String() }
			fmt.Fprintf(tw, "%s\t %d\t %.1f\t %.1f\t %.1f\t %.0f\t %.0f\t %.0f%%\t %s\t %s\t %s\t %s\t\n", s.scenario, s.processes,
				float64(s.commits)/n, float64(s.rowsIns)/n, float64(s.rowsUpd)/n, float64(s.walRecords)/n, float64(s.walBytes)/n,
				100*busy, per(s.cpu.workers), per(s.cpu.postgres), per(s.cpu.sim), per(other))
		}
		tw.Flush()
	}

	best := -1.0
	for _, r := range rs {
		if r.system == "oncejob engine" && r.scenario == "light" {
			best = max(best, r.rate)
		}
	}
	if best < 0 {
		return -1
	}
	ratio := best / riverRate["light"]
	verdict := "MET"
	if ratio < c.target {
		verdict = "NOT MET"
	}
	fmt.Fprintf(w, "\nlight: best engine / River (same N) = %.3f (target >= %.2f: %s)\n", ratio, c.target, verdict)
	return ratio
}

func riverVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/riverqueue/river" {
				return d.Version
			}
		}
	}
	return ""
}

// Processes.

type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan error
	err     error
	ended   bool
}

func startProc(ctx context.Context, name, logPath, bin string, args ...string) (*proc, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = cleanEnv()
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, logFile: lf, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	return p, nil
}

// cleanEnv is the environment without ONCEJOB_* variables: every flag of
// the oncejob processes is given here.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ONCEJOB_") {
			env = append(env, kv)
		}
	}
	return env
}

func (p *proc) exited() bool {
	if p.ended {
		return true
	}
	select {
	case err := <-p.done:
		p.err, p.ended = err, true
		return true
	default:
		return false
	}
}

func (p *proc) tail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return fmt.Sprintf("%s (%v):\n%s", p.name, p.err, b)
}

func (p *proc) stop() {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case p.err = <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			p.err = <-p.done
		}
		p.ended = true
	}
	p.logFile.Close()
}

func waitListen(ctx context.Context, p *proc, addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			return nil
		}
		if p.exited() {
			return fmt.Errorf("exited before listening: %s", p.tail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not listen on %s within 30s", p.name, addr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Simulator.

func httpPost(ctx context.Context, url, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, b)
	}
	return nil
}

func simBilled(ctx context.Context, simURL string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, simURL+"/oncejob/stats", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st struct {
		BilledCalls int64 `json:"billed_calls"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, err
	}
	return st.BilledCalls, nil
}

// Helpers.

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

func poolDesc(n int) string {
	if n > 0 {
		return strconv.Itoa(n)
	}
	return "default"
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func cmdRun(ctx context.Context, dir string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, buf.String())
	}
	return nil
}

// findRoot walks up from the working directory to the oncejob module root.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if strings.TrimSpace(sc.Text()) == "module "+rootModule {
					f.Close()
					return dir, nil
				}
			}
			f.Close()
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory: pass -root", rootModule)
		}
		dir = parent
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}
