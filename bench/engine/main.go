// Command engine measures oncejob's engine, jobs per second from queued to
// SUCCEEDED, against River on the same Postgres, and what each job costs
// the database.
//
// One run, phases strictly one after another on a fresh database each
// (-phases chooses them; bench/README.md says what each does):
//
//   - light, realistic: for each number of worker processes (-processes), N
//     jobs are submitted through SubmitJob (gRPC, ghz) with the workers
//     stopped, then the `oncejob worker` processes start and the clock runs
//     until the last job is SUCCEEDED. light is a one-chunk document and the
//     trivial schema {type: object}; realistic a ~7,400-character document
//     that splits into four chunks and a schema with required properties.
//     The LLM is `oncejob llm-sim` at zero latency; every document is
//     different in every chunk, so neither the dedup key nor the decision
//     cache saves any work;
//   - river: River (github.com/riverqueue/river with riverpgxv5), in this
//     process, with the client settings of River's own benchmark
//     (cmd/river/riverbench: FetchCooldown 2ms, FetchPollInterval 20ms,
//     MaxWorkers 2,000, pgxpool defaults): the light N of no-op jobs
//     inserted with InsertMany, then the clock runs from client.Start to the
//     last completion event;
//   - riverdurable: the same, each job's worker inserting a result row and
//     an outbox row and completing the job in one transaction
//     (river.JobCompleteTx): the durable effect oncejob's light job has;
//   - riversame: the same work as the light job (riversame.go): an
//     attempt-journal row and a "claimed" event committed before one chat
//     completion from the same llm-sim, then the journal's answer, a
//     checkpoint, the result, an outbox row and a "published" event in the
//     transaction that completes the job (JobCompleteTx);
//   - per job costs (-cost-repeats, for light and the River phases):
//     -cost-jobs jobs with the clients connected through a proxy that counts
//     the protocol's statements, the database's commits and the cluster's
//     WAL around it, repeated, the median printed;
//   - inflight: -inflight-jobs jobs waiting on a simulated -inflight-latency
//     in one worker process with --workers -inflight-workers: throughput
//     against in-flight / latency, memory per in-flight job;
//   - embedded: `oncejob serve` on the embedded SQLite store, light jobs/s.
//
// jobs/s = N / (time from the start of the workers to the last job done).
//
//	cd bench && go run ./engine            # every phase, small defaults (a few minutes)
//	cd bench && go run ./engine -account   # the statement-by-statement account (issue 33)
//	cd bench && go run ./engine -quick     # smoke run
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
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
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

// lightText is the light job's document template for ghz: {{.UUID}} makes
// each document (and its one chunk) unique.
const lightText = "{{.UUID}} a one-chunk document for the light pipeline"

type scenario struct {
	name     string
	pipeline string
	chunks   int    // LLM calls per job
	text     string // ghz data template; {{.UUID}} makes each document (and chunk) unique
	jobs     int
}

func lightScenario(n int) scenario {
	return scenario{name: "light", pipeline: "light", chunks: 1, jobs: n, text: lightText}
}

func realisticScenario(n int) scenario {
	return scenario{name: "realistic", pipeline: "realistic", chunks: 4, jobs: n, text: realisticText()}
}

// allPhases are the phases of -phases, in the order they run.
var allPhases = []string{"light", "realistic", "river", "riverdurable", "riversame", "inflight", "embedded"}

type config struct {
	root             string
	pgURL            string
	db               string
	riverDB          string
	phases           map[string]bool
	quick            bool
	lightJobs        int
	realisticJobs    int
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
	history          int
	costRepeats      int
	costJobs         int
	inflightJobs     int
	inflightWorkers  int
	inflightLatency  time.Duration
	inflightLease    time.Duration
	embeddedJobs     int
	embeddedWorkers  int
	workerArgs       []string
	walBaseline      float64
	phaseTimeout     time.Duration
	logLevel         string
	strict           bool
	keep             bool
	statementsReport bool
	account          bool
	accountJobs      int
	natsURL          string
	before           string
	throwaway        bool
	rounds           int
}

// quickDefaults are the -quick values of the flags not set on the command
// line: every phase, small, for a smoke run (about a minute and a half).
var quickDefaults = map[string]string{
	"light-jobs":       "300",
	"realistic-jobs":   "100",
	"warmup-jobs":      "50",
	"cost-repeats":     "1",
	"cost-jobs":        "200",
	"inflight-jobs":    "1000",
	"inflight-workers": "1000",
	"embedded-jobs":    "300",
}

func main() {
	var c config
	var phases string
	flag.StringVar(&c.root, "root", "", "oncejob repository root (default: found from the working directory upwards)")
	flag.StringVar(&c.pgURL, "pg", envOr("BENCH_PG", "postgres://postgres@127.0.0.1:5432"), "Postgres server URL without database (env BENCH_PG)")
	flag.StringVar(&c.db, "db", "oncejob_bench_engine", "throwaway database of the engine, dropped and recreated for every phase")
	flag.StringVar(&c.riverDB, "river-db", "oncejob_bench_river", "throwaway database of River, dropped and recreated for every phase")
	flag.StringVar(&phases, "phases", strings.Join(allPhases, ","), "phases to run, comma-separated: "+strings.Join(allPhases, ", "))
	flag.BoolVar(&c.quick, "quick", false, "smoke run: small N for every flag not given (light 300, realistic 100, 1 cost repeat of 200, in-flight 1,000, embedded 300)")
	flag.IntVar(&c.lightJobs, "light-jobs", 2000, "jobs per phase of the light scenario (the River phases work as many)")
	flag.IntVar(&c.realisticJobs, "realistic-jobs", 500, "jobs per phase of the realistic scenario")
	flag.StringVar(&c.processes, "processes", "1", "numbers of `oncejob worker` processes, one phase each, comma-separated (the targets are for one)")
	flag.IntVar(&c.workers, "workers", 32, "--workers of each engine process (jobs run at once per process) in the light, realistic and cost phases; 0: the binary's default")
	flag.IntVar(&c.poolMaxConns, "pool-max-conns", 0, "if > 0, pool_max_conns=N on each worker's --database-url (default: the store's, 16 at the time of writing; River's pool here: pgxpool's max(4, GOMAXPROCS))")
	flag.DurationVar(&c.pollInterval, "poll-interval", 20*time.Millisecond, "--poll-interval of the workers (River's FetchPollInterval is 20ms)")
	flag.DurationVar(&c.leaseDuration, "lease-duration", 30*time.Second, "--lease-duration of the workers")
	flag.DurationVar(&c.simLatency, "sim-latency", 0, "latency of every simulated LLM call (all phases but inflight)")
	flag.UintVar(&c.submitC, "submit-c", 32, "concurrency of the SubmitJob calls that fill the queue (not measured)")
	flag.IntVar(&c.riverMaxWorkers, "river-max-workers", 2000, "River's MaxWorkers (riverbench: 2,000)")
	flag.IntVar(&c.riverSteadyJobs, "river-steady-jobs", 0, "if > 0, one more River no-op phase with this many jobs, its throughput once fetch latency is amortised (reference)")
	flag.IntVar(&c.warmupJobs, "warmup-jobs", 200, "jobs the workers run before each measured engine phase, then VACUUM ANALYZE: the measured run starts on tables with history and statistics (0: a fresh database)")
	flag.IntVar(&c.history, "history", 0, "succeeded jobs (tenant history, with a document, a checkpoint, a journal row, two events and an outbox row each) inserted by SQL into each engine phase's fresh database before its warmup: a deployment with history, whose tables autovacuum analyzed at that size (the engine's generic plans need 10,000 rows; docs/architecture.md, \"Generic plans for the engine, custom plans for the rest\")")
	flag.IntVar(&c.costRepeats, "cost-repeats", 3, "per job costs: phases per system (light engine and the River phases, as selected), the median printed; 0: none")
	flag.IntVar(&c.costJobs, "cost-jobs", 500, "jobs per cost phase")
	flag.IntVar(&c.inflightJobs, "inflight-jobs", 10000, "jobs of the in-flight phase (a multiple of -inflight-workers: an engine that adds nothing to the wait does them at workers / latency)")
	flag.IntVar(&c.inflightWorkers, "inflight-workers", 10000, "--workers of the in-flight phase's one worker process")
	flag.DurationVar(&c.inflightLatency, "inflight-latency", 2*time.Second, "simulated LLM latency of the in-flight phase")
	flag.DurationVar(&c.inflightLease, "inflight-lease", 2*time.Minute, "--lease-duration of the in-flight phase (longer than the time a claimed job may wait for a connection)")
	flag.IntVar(&c.embeddedJobs, "embedded-jobs", 2000, "light jobs of the embedded phase")
	flag.IntVar(&c.embeddedWorkers, "embedded-workers", 32, "--workers of the embedded server; 0: the binary's default")
	var workerArgs string
	flag.StringVar(&workerArgs, "worker-args", "", "more flags for every `oncejob worker` and the embedded serve that runs jobs, space-separated (e.g. \"--publish-linger 2ms\")")
	flag.Float64Var(&c.walBaseline, "wal-baseline", 16000, "WAL bytes per light job before issue 12 (the median of this bench's cost phases on main, 2026-12-03); target: <= 1/3 of it")
	flag.DurationVar(&c.phaseTimeout, "phase-timeout", 5*time.Minute, "fail a phase that has not finished by then")
	flag.StringVar(&c.logLevel, "log-level", "warn", "--log-level of the oncejob processes (their logs go to files in the temp dir)")
	flag.BoolVar(&c.strict, "strict", false, "exit 1 if a target is not met")
	flag.BoolVar(&c.keep, "keep", false, "keep the last databases and the temp dir (logs, pipelines file)")
	flag.BoolVar(&c.account, "account", false, "instead of the phases: the statement-by-statement account of a light job, a new-key SubmitJob, a relayed event (JetStream) and River's same-work job, from pg_stat_statements in a throwaway Postgres cluster (account.go)")
	flag.IntVar(&c.accountJobs, "account-jobs", 1000, "jobs of each account")
	flag.StringVar(&c.natsURL, "nats", envOr("BENCH_NATS", "nats://127.0.0.1:4222"), "NATS server (JetStream) of the account's relayed events: the light jobs' events routed by `oncejob relay` to a stream of the bench's (env BENCH_NATS; \"\": no relayed-event account)")
	flag.BoolVar(&c.throwaway, "throwaway", false, "run the phases on a Postgres cluster of the bench's own (initdb, its own port, removed at the end; the shared server's settings) instead of -pg: no other database's work in the Postgres CPU and WAL figures")
	flag.IntVar(&c.rounds, "rounds", 1, "the light and River phases this many times, in turn (with -before, odd rounds run the trees in the other order); the ratios are of the medians")
	flag.StringVar(&c.before, "before", "", "oncejob trees, comma-separated (e.g. `git archive main | tar -x -C DIR`), whose binaries also run the light phases, the light cost phases and the account, as \"oncejob @<dir's name>\", just before the measured tree's: a change's before and after in one run")
	flag.BoolVar(&c.statementsReport, "statements", true, "print what Postgres counted and the CPU per job of the throughput phases")
	flag.Parse()

	if c.quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range quickDefaults {
			if !set[name] {
				_ = flag.Set(name, v)
			}
		}
	}
	c.workerArgs = strings.Fields(workerArgs)
	var err error
	if c.phases, err = parsePhases(phases); err != nil {
		fmt.Fprintln(os.Stderr, "bench: -phases:", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench: FAIL:", err)
		os.Exit(1)
	}
}

// parsePhases reads -phases: names of allPhases, comma-separated.
func parsePhases(s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		known := false
		for _, p := range allPhases {
			known = known || p == f
		}
		if !known {
			return nil, fmt.Errorf("unknown phase %q (%s)", f, strings.Join(allPhases, ", "))
		}
		out[f] = true
	}
	if len(out) == 0 {
		return nil, errors.New("no phase")
	}
	return out, nil
}

const (
	sysEngine       = "oncejob"
	sysRiver        = "River no-op"
	sysRiverDurable = "River durable"
	sysRiverSame    = "River same-work"
	sysEmbedded     = "oncejob embedded"
)

type result struct {
	scenario  string
	system    string
	processes int
	jobs      int
	elapsed   time.Duration
	rate      float64
	// The embedded phase: CPU of the serve process, and how busy the
	// machine was, during the run.
	cpu         time.Duration
	machineBusy float64
	// waits: what the database's active backends waited on (engine phases).
	waits string
	// pgCPU: the CPU of the Postgres server's processes over the measured
	// run (0 when the server is not on this machine).
	pgCPU time.Duration
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

	bin, befores, err := buildTrees(ctx, c, tmp)
	if err != nil {
		return err
	}

	if c.account {
		return runAccount(ctx, c, tmp, bin, befores, pipelinesPath)
	}
	if c.throwaway {
		cl, err := startThrowaway(ctx, false)
		if err != nil {
			return err
		}
		defer cl.close()
		c.pgURL = cl.url()
		logf("throwaway Postgres on %s, removed at the end", c.pgURL)
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

	sim, simAddr, err := startSim(ctx, c, tmp, bin)
	if err != nil {
		return err
	}
	defer sim.stop()
	simURL := "http://" + simAddr
	logf("llm-sim on %s, latency %s", simAddr, c.simLatency)

	e := &engineBench{c: c, bin: bin, tmp: tmp, pipelines: pipelinesPath, admin: admin, simURL: simURL, simPID: sim.cmd.Process.Pid}
	for _, b := range befores {
		e.befores = append(e.befores, &engineBench{c: c, bin: b.bin, tmp: tmp, pipelines: pipelinesPath, admin: admin, simURL: simURL,
			simPID: sim.cmd.Process.Pid, system: b.label})
	}
	return e.runAndReport(ctx, procs)
}

// runAndReport runs the phases and prints the report; with -strict, a
// target missed fails it.
func (e *engineBench) runAndReport(ctx context.Context, procs []int) error {
	c := e.c
	rep := &report{c: c, loadBefore: loadavg()}
	if err := e.runPhases(ctx, procs, rep); err != nil {
		return err
	}
	rep.loadAfter = loadavg()
	rep.stats = e.stats

	missed := rep.print(os.Stdout)
	fmt.Printf("load average (1m) before/after: %s / %s on %d CPUs; every phase shares the machine with whatever else runs\n",
		rep.loadBefore, rep.loadAfter, runtime.NumCPU())
	if c.strict && len(missed) > 0 {
		return fmt.Errorf("targets not met: %s", strings.Join(missed, "; "))
	}
	return nil
}

// runPhases runs the phases -phases selects, procs being the -processes
// list, and adds their results to rep.
func (e *engineBench) runPhases(ctx context.Context, procs []int, rep *report) error {
	c := e.c
	for round := range max(c.rounds, 1) {
		if err := e.throughputRound(ctx, procs, round, rep); err != nil {
			return err
		}
	}
	if c.phases["river"] && c.riverSteadyJobs > 0 {
		r, _, err := e.riverPhase(ctx, riverRun{name: "steady", n: c.riverSteadyJobs, kind: riverNoop})
		if err != nil {
			return fmt.Errorf("river, steady: %w", err)
		}
		rep.results = append(rep.results, r)
	}

	// Per job costs: the systems in turn, repeat after repeat, so that what
	// else runs on the machine spreads over all of them.
	for i := range c.costRepeats {
		for _, eb := range e.engines() {
			if !c.phases["light"] {
				break
			}
			s, err := eb.costPhase(ctx, i)
			if err != nil {
				return fmt.Errorf("cost, %s, repeat %d: %w", eb.sys(), i+1, err)
			}
			rep.costs = append(rep.costs, s)
		}
		for _, kind := range riverKinds {
			if !c.phases[kind.phase()] {
				continue
			}
			_, s, err := e.riverPhase(ctx, riverRun{name: fmt.Sprintf("cost-%d", i+1), n: c.costJobs, kind: kind, cost: true})
			if err != nil {
				return fmt.Errorf("cost, %s, repeat %d: %w", kind.system(), i+1, err)
			}
			rep.costs = append(rep.costs, s)
		}
	}

	if c.phases["inflight"] {
		r, err := e.inflightPhase(ctx)
		if err != nil {
			return fmt.Errorf("inflight: %w", err)
		}
		rep.inflight = &r
	}
	if c.phases["embedded"] {
		r, err := e.embeddedPhase(ctx)
		if err != nil {
			return fmt.Errorf("embedded: %w", err)
		}
		rep.results = append(rep.results, r)
	}
	return nil
}

// builtTree is a -before tree's binary and the name of its results.
type builtTree struct{ label, bin string }

// buildTrees builds the oncejob binary of -root and of each -before tree
// into tmp.
func buildTrees(ctx context.Context, c config, tmp string) (string, []builtTree, error) {
	logf("building oncejob from %s", c.root)
	bin := filepath.Join(tmp, "oncejob")
	if err := cmdRun(ctx, c.root, "go", "build", "-o", bin, "./cmd/oncejob"); err != nil {
		return "", nil, fmt.Errorf("build: %w", err)
	}
	var befores []builtTree
	for i, dir := range strings.Split(c.before, ",") {
		if dir = strings.TrimSpace(dir); dir == "" {
			continue
		}
		b := builtTree{label: sysEngine + " @" + filepath.Base(dir), bin: filepath.Join(tmp, fmt.Sprintf("oncejob-before-%d", i))}
		logf("building %s from %s", b.label, dir)
		if err := cmdRun(ctx, dir, "go", "build", "-o", b.bin, "./cmd/oncejob"); err != nil {
			return "", nil, fmt.Errorf("build (%s): %w", dir, err)
		}
		befores = append(befores, b)
	}
	return bin, befores, nil
}

// throughputRound runs the light and realistic phases -phases selects,
// for each engine (the -before trees first, or last in an odd round), then
// the River phases, once.
func (e *engineBench) throughputRound(ctx context.Context, procs []int, round int, rep *report) error {
	c := e.c
	for _, sc := range []scenario{lightScenario(c.lightJobs), realisticScenario(c.realisticJobs)} {
		if !c.phases[sc.name] {
			continue
		}
		for _, p := range procs {
			engines := e.engines()
			if round%2 == 1 {
				// An engine phase right after another runs slower than the
				// first of a round (measured: 5-15 %): odd rounds take
				// the engines in the other order.
				slices.Reverse(engines)
			}
			for _, eb := range engines {
				r, err := eb.phase(ctx, sc, p)
				if err != nil {
					return fmt.Errorf("%s, %s, %d process(es): %w", eb.sys(), sc.name, p, err)
				}
				rep.results = append(rep.results, r)
				if eb != e {
					e.stats = append(e.stats, eb.stats...)
					eb.stats = nil
				}
			}
		}
	}
	for _, kind := range riverKinds {
		if !c.phases[kind.phase()] {
			continue
		}
		r, _, err := e.riverPhase(ctx, riverRun{name: "light", n: c.lightJobs, kind: kind})
		if err != nil {
			return fmt.Errorf("%s: %w", kind.system(), err)
		}
		rep.results = append(rep.results, r)
	}
	return nil
}

// startSim starts bin's llm-sim, logging in tmp, with -sim-latency set, and
// returns it and its address.
func startSim(ctx context.Context, c config, tmp, bin string) (*proc, string, error) {
	simAddr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	sim, err := startProc(ctx, "llm-sim", filepath.Join(tmp, "llm-sim.log"), bin, "llm-sim", "--addr", simAddr, "--log-level", c.logLevel)
	if err != nil {
		return nil, "", err
	}
	if err := waitListen(ctx, sim, simAddr); err != nil {
		sim.stop()
		return nil, "", err
	}
	if err := setSimLatency(ctx, "http://"+simAddr, c.simLatency); err != nil {
		sim.stop()
		return nil, "", fmt.Errorf("simulator latency: %w", err)
	}
	return sim, simAddr, nil
}

func setSimLatency(ctx context.Context, simURL string, d time.Duration) error {
	return httpPost(ctx, simURL+"/oncejob/faults", fmt.Sprintf(`{"latency":%q}`, d.String()))
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
	return startProcEnv(ctx, name, logPath, nil, bin, args...)
}

// startProcEnv starts bin with env added to the environment.
func startProcEnv(_ context.Context, name, logPath string, env []string, bin string, args ...string) (*proc, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(cleanEnv(), env...)
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
