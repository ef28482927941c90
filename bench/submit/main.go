// Command submit measures submitting jobs against peers on the same
// Postgres, in one run.
//
// It builds and starts the real oncejob server (API only: --workers 0) on
// a throwaway database and drives it over gRPC, then runs the peers at the
// same concurrency, phases strictly one after another for the same
// duration, and prints each rate with its ratio to its peer:
//
//   - SubmitJob with new keys (ghz, -c 32) vs pgbench's one-row insert
//     into a twin of jobs;
//
//   - SubmitJob replays vs pgbench's INSERT ... ON CONFLICT DO NOTHING on
//     existing keys of a twin of idempotency_keys (the read path of an
//     insert-or-return);
//
//   - SubmitJobs in batches of 1,000 (-batch-c concurrent calls) vs River's
//     InsertMany of the same documents (same Postgres, same run) and
//     pgbench's COPY of 1,000 rows into a twin of jobs;
//
//   - the embedded store (oncejob serve with no --database-url): SubmitJob
//     with new keys and SubmitJobs batches, against absolute targets.
//
//     cd bench && go run ./submit            # defaults: -c 32 -duration 15s
//     cd bench && go run ./submit -h         # every knob
//
// It exits non-zero if any call or transaction failed, if a replay created a
// job, or, with -strict, if a target is missed.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/bojand/ghz/runner"
	"google.golang.org/grpc/metadata"
)

const (
	rootModule = "github.com/oncejob/oncejob"
	submitCall = "oncejob.v1.JobService.SubmitJob"
)

type config struct {
	root         string
	client       string
	batchSize    int
	batchConc    int
	embedded     bool
	linger       time.Duration
	pgURL        string
	db           string
	concurrency  uint
	connections  uint
	pgbenchJobs  int
	duration     time.Duration
	warmup       time.Duration
	replayKeys   int
	docBytes     int
	uniqueDocs   bool
	poolMaxConns int
	logLevel     string
	pgbenchFull  bool
	strict       bool
	keep         bool
	perfOut      string
	before       string // trees to compare with, comma-separated
	rounds       int
}

func main() {
	var c config
	flag.StringVar(&c.root, "root", "", "oncejob repository root (default: found from the working directory upwards)")
	flag.StringVar(&c.pgURL, "pg", envOr("BENCH_PG", "postgres://postgres@127.0.0.1:5432"), "Postgres server URL without database (env BENCH_PG)")
	flag.StringVar(&c.db, "db", envOr("BENCH_DB", "oncejob_bench"), "throwaway database, dropped and recreated (env BENCH_DB)")
	flag.UintVar(&c.concurrency, "c", 32, "concurrent calls (ghz -c) and clients (pgbench -c)")
	flag.UintVar(&c.connections, "connections", 1, "gRPC connections ghz spreads the calls over")
	flag.IntVar(&c.pgbenchJobs, "pgbench-threads", 2, "pgbench -j")
	flag.DurationVar(&c.duration, "duration", envDuration("BENCH_DURATION", 15*time.Second), "length of each measured phase (env BENCH_DURATION)")
	flag.DurationVar(&c.warmup, "warmup", envDuration("BENCH_WARMUP", 3*time.Second), "new-key SubmitJob warmup before measuring, not counted (env BENCH_WARMUP)")
	flag.IntVar(&c.replayKeys, "replay-keys", 32, "existing keys the replay phase cycles through")
	flag.IntVar(&c.docBytes, "doc-bytes", 1024, "size of each document's text")
	flag.BoolVar(&c.uniqueDocs, "unique-docs", true, "new-key calls each send a different document (false: all send the same one)")
	flag.IntVar(&c.poolMaxConns, "pool-max-conns", 0, "if > 0, pool_max_conns=N on the server's --database-url (pgx default: max(4, GOMAXPROCS))")
	flag.StringVar(&c.logLevel, "log-level", "info", "server --log-level (its log goes to a file)")
	flag.BoolVar(&c.pgbenchFull, "pgbench-full", true, "also run pgbench with the whole JobSubmit statement (4 tables), as a reference")
	flag.StringVar(&c.client, "client", "lean", "SubmitJob load generator: lean (wire bytes, little CPU, as pgbench's C client) or ghz")
	flag.IntVar(&c.batchSize, "batch-size", 1000, "items per SubmitJobs call, River InsertMany call and pgbench COPY")
	flag.IntVar(&c.batchConc, "batch-c", 4, "concurrent SubmitJobs calls, River InsertMany callers and pgbench COPY clients")
	flag.BoolVar(&c.embedded, "embedded", true, "also measure the embedded store (oncejob serve with no --database-url)")
	flag.DurationVar(&c.linger, "submit-linger", 0, "if set, the server's --submit-linger (group commit wait; default the server's, 1ms)")
	flag.BoolVar(&c.strict, "strict", false, "exit 1 if a target is missed")
	flag.BoolVar(&c.keep, "keep", false, "keep the database and the temp dir (server log, pgbench scripts)")
	flag.StringVar(&c.before, "before", "", "`DIR[,DIR]`: also build the server from these trees (e.g. `git archive main | tar -x -C DIR`) and run the three server phases against each, on a database of its own, alternating with this tree's (-rounds); the peers run once")
	flag.IntVar(&c.rounds, "rounds", 0, "with -before, rounds of the server phases, the trees in the other order every odd round (default 2)")
	flag.StringVar(&c.perfOut, "perf", "", "if set, `perf record -a -g` (whole machine: server, Postgres, ghz) during the new-key phase into this file")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench: FAIL:", err)
		os.Exit(1)
	}
}

// result is one measured phase. A phase with a peer is compared with it
// (ratio = rate / peer's rate, target a ratio); one without, with an
// absolute target (rate / target).
type result struct {
	name  string
	rate  float64
	count uint64
	note  string
	// CPU per operation of the server process and of the Postgres
	// backends of its database (server phases only), µs.
	serverCPU, pgCPU float64
	peer             string  // the name of the result it is compared with
	target           float64 // a ratio to peer, or a rate without one; 0: none
}

func run(ctx context.Context, c config) error {
	if c.root == "" {
		r, err := findRoot()
		if err != nil {
			return err
		}
		c.root = r
	}
	tmp, cleanup, err := c.tempDir()
	if err != nil {
		return err
	}
	defer cleanup()

	logf("building the server from %s", c.root)
	bin := filepath.Join(tmp, "oncejob")
	if err := cmdRun(ctx, c.root, "go", "build", "-o", bin, "./cmd/oncejob"); err != nil {
		return fmt.Errorf("build server: %w", err)
	}

	adminURL := c.pgURL + "/postgres"
	dbURL := c.pgURL + "/" + c.db + "?sslmode=disable"
	riverDB := c.db + "_river"
	dbs := []string{c.db, riverDB}
	trees := []*tree{{label: "", db: c.db, root: c.root, bin: bin, dbURL: dbURL}}
	trees, dbs, err = c.beforeTrees(ctx, tmp, trees, dbs)
	if err != nil {
		return err
	}
	drop, err := recreateDBs(ctx, adminURL, c.keep, dbs...)
	if err != nil {
		return err
	}
	defer drop()
	if len(trees) > 1 {
		return compareTrees(ctx, c, trees, tmp, c.pgURL+"/"+riverDB+"?sslmode=disable")
	}

	srv, addr, err := c.startPgServer(ctx, bin, tmp, dbURL)
	if err != nil {
		return err
	}
	defer srv.stop()

	p := newPhases(c, addr, dbURL, tmp, c.pgURL+"/"+riverDB+"?sslmode=disable")
	p.serverPid, p.db = srv.cmd.Process.Pid, c.db
	if err := p.prepare(ctx); err != nil {
		return err
	}

	loadBefore := loadavg()
	results, err := p.server(ctx)
	if err != nil {
		return err
	}
	pg, err := p.postgres(ctx)
	if err != nil {
		return err
	}
	results = append(results, pg...)
	srv.stop()

	if c.embedded {
		res, err := embeddedPhases(ctx, c, bin, tmp, p.filler, p.newBody)
		if err != nil {
			return err
		}
		results = append(results, res...)
	}

	missed := printResults(os.Stdout, c, results)
	fmt.Printf("load average (1m) before/after the measured phases: %s / %s on %d CPUs; the phases share the machine with whatever else runs, so compare on a quiet one\n",
		loadBefore, loadavg(), runtime.NumCPU())
	if c.strict && len(missed) > 0 {
		return fmt.Errorf("targets missed: %s", strings.Join(missed, "; "))
	}
	return nil
}

// tempDir is the run's temp dir, and what removes it (unless -keep).
func (c config) tempDir() (string, func(), error) {
	tmp, err := os.MkdirTemp("", "oncejob-bench-")
	if err != nil {
		return "", nil, err
	}
	// Postgres reads the COPY file as its own user.
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return "", nil, err
	}
	if c.keep {
		logf("temp dir %s (kept)", tmp)
		return tmp, func() {}, nil
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

// beforeTrees builds the server of each -before tree and adds it, with a
// database of its own, to trees and dbs.
func (c config) beforeTrees(ctx context.Context, tmp string, trees []*tree, dbs []string) ([]*tree, []string, error) {
	if c.before != "" {
		for i, dir := range strings.Split(c.before, ",") {
			logf("building the server from %s (-before)", dir)
			b := filepath.Join(tmp, fmt.Sprintf("oncejob-before%d", i))
			if err := cmdRun(ctx, dir, "go", "build", "-o", b, "./cmd/oncejob"); err != nil {
				return nil, nil, fmt.Errorf("build server of %s: %w", dir, err)
			}
			db := fmt.Sprintf("%s_before%d", c.db, i)
			dbs = append(dbs, db)
			trees = append(trees, &tree{label: "@" + dir, db: db, root: dir, bin: b, dbURL: c.pgURL + "/" + db + "?sslmode=disable"})
		}
	}
	return trees, dbs, nil
}

// phases is what the measured phases share: the server's address and
// database, the River database, the temp dir and the submissions' bodies.
type phases struct {
	c                           config
	serverPid                   int    // for CPU per operation
	db                          string // the database's name, for its backends' CPU
	g                           *ghz
	addr, dbURL, tmp, riverURL  string
	filler, newBody, replayBody string
}

// newPhases is the phases' shared state for the server at addr on dbURL.
func newPhases(c config, addr, dbURL, tmp, riverURL string) *phases {
	g := &ghz{root: c.root, addr: addr, conc: c.concurrency, conns: c.connections}
	filler := strings.Repeat("x", max(0, c.docBytes-40))
	newBody := submitBody("fixed " + filler)
	if c.uniqueDocs {
		newBody = submitBody("{{.UUID}} " + filler)
	}
	replayBody := submitBody("replay " + filler)
	return &phases{c: c, g: g, addr: addr, dbURL: dbURL, tmp: tmp, riverURL: riverURL, filler: filler, newBody: newBody, replayBody: replayBody}
}

// recreateDBs drops and creates each of dbs on the server at adminURL. The
// function it returns drops them again, the last first, unless keep; on an
// error it has dropped those it created.
func recreateDBs(ctx context.Context, adminURL string, keep bool, dbs ...string) (func(), error) {
	var created []string
	drop := func() {
		if keep {
			return
		}
		for i := len(created) - 1; i >= 0; i-- {
			_, _ = psql(context.Background(), adminURL, fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, created[i]))
		}
	}
	for _, db := range dbs {
		logf("recreating database %s", db)
		if _, err := psql(ctx, adminURL, fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, db)); err != nil {
			drop()
			return nil, err
		}
		if _, err := psql(ctx, adminURL, fmt.Sprintf(`CREATE DATABASE %q`, db)); err != nil {
			drop()
			return nil, err
		}
		created = append(created, db)
	}
	return drop, nil
}

// startPgServer starts the server on the database at dbURL (with
// -pool-max-conns), logging to tmp/server.log, and returns it and its
// gRPC address.
func (c config) startPgServer(ctx context.Context, bin, tmp, dbURL string) (*server, string, error) {
	serverURL := dbURL
	if c.poolMaxConns > 0 {
		serverURL += "&pool_max_conns=" + strconv.Itoa(c.poolMaxConns)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	srv, err := startServer(ctx, bin, c.serverArgs("--database-url", serverURL, "--migrate", "--grpc-addr", addr), filepath.Join(tmp, "server.log"))
	if err != nil {
		return nil, "", err
	}
	logf("server pid %d on %s (log %s)", srv.cmd.Process.Pid, addr, srv.logPath)
	return srv, addr, nil
}

// prepare makes the pgbench twin tables, runs the warmup and creates the
// replay phase's keys (copied into the twin of idempotency_keys).
func (p *phases) prepare(ctx context.Context) error {
	// The pgbench twins: same columns, types, defaults, checks and indexes
	// (LIKE ... INCLUDING ALL), no foreign keys. COPY's twin draws its ids.
	if _, err := psql(ctx, p.dbURL, `CREATE TABLE pgbench_jobs (LIKE jobs INCLUDING ALL);
CREATE TABLE pgbench_jobs_copy (LIKE jobs INCLUDING ALL);
ALTER TABLE pgbench_jobs_copy ALTER COLUMN id SET DEFAULT gen_random_uuid();
CREATE TABLE pgbench_keys (LIKE idempotency_keys INCLUDING ALL)`); err != nil {
		return err
	}
	if err := p.warmupAndReplayKeys(ctx); err != nil {
		return err
	}
	_, err := psql(ctx, p.dbURL, `INSERT INTO pgbench_keys SELECT * FROM idempotency_keys WHERE idem_key LIKE 'replay-%'`)
	return err
}

// warmupAndReplayKeys runs the warmup and creates the replay phase's keys
// (an existing key is replayed: a second round finds them made).
func (p *phases) warmupAndReplayKeys(ctx context.Context) error {
	if err := p.warmup(ctx); err != nil {
		return err
	}

	logf("creating %d keys for the replay phase", p.c.replayKeys)
	if _, err := p.g.run(ctx, "replay-setup", p.replayBody, `{"idempotency-key":"replay-{{.RequestNumber}}"}`,
		runner.WithTotalRequests(uint(p.c.replayKeys)), runner.WithConcurrency(1)); err != nil {
		return err
	}
	if n, err := psqlInt(ctx, p.dbURL, `SELECT count(*) FROM jobs WHERE idempotency_key LIKE 'replay-%'`); err != nil {
		return err
	} else if n != p.c.replayKeys {
		return fmt.Errorf("replay setup made %d jobs, want %d", n, p.c.replayKeys)
	}
	return nil
}

// server runs the phases through the server: SubmitJob with new keys, with
// existing keys, and SubmitJobs batches; each checks the jobs it made.
func (p *phases) server(ctx context.Context) ([]result, error) {
	c, g, addr, dbURL, filler := p.c, p.g, p.addr, p.dbURL, p.filler
	var results []result
	logf("SubmitJob, new keys, -c %d for %s", c.concurrency, c.duration)
	var perf *exec.Cmd
	if c.perfOut != "" {
		perf = exec.CommandContext(ctx, "perf", "record", "-a", "-g", "-o", c.perfOut,
			"--", "sleep", strconv.Itoa(int(c.duration.Seconds())))
		perf.Stdout, perf.Stderr = os.Stderr, os.Stderr
		if err := perf.Start(); err != nil {
			return nil, fmt.Errorf("perf: %w", err)
		}
	}
	before, err := psqlInt(ctx, dbURL, `SELECT count(*) FROM jobs`)
	if err != nil {
		return nil, err
	}
	cpu0 := takeCPU(p.serverPid, p.db)
	newRate, newCount, newNote, err := c.newKeys(ctx, g, addr, p.newBody, filler, "new")
	if err != nil {
		return nil, err
	}
	if perf != nil {
		_ = perf.Wait()
	}
	after, err := psqlInt(ctx, dbURL, `SELECT count(*) FROM jobs`)
	if err != nil {
		return nil, err
	}
	if uint64(after-before) != newCount {
		return nil, fmt.Errorf("new-key phase: %d OK calls but %d new jobs", newCount, after-before)
	}
	cpuNew, srvNew, pgNew := cpuNote(cpu0, takeCPU(p.serverPid, p.db), newCount)
	results = append(results, result{name: nameNewKey, rate: newRate, count: newCount, note: join(newNote, cpuNew), peer: namePgInsert, target: 1.0,
		serverCPU: srvNew, pgCPU: pgNew})

	logf("SubmitJob, existing keys (replays), -c %d for %s", c.concurrency, c.duration)
	before = after
	cpu0 = takeCPU(p.serverPid, p.db)
	replayRate, replayCount, replayNote, err := c.replays(ctx, g, addr, p.replayBody, "replay "+filler)
	if err != nil {
		return nil, err
	}
	if after, err = psqlInt(ctx, dbURL, `SELECT count(*) FROM jobs`); err != nil {
		return nil, err
	}
	if after != before {
		return nil, fmt.Errorf("replay phase created %d jobs: the replays were not replays", after-before)
	}
	cpuReplay, srvReplay, pgReplay := cpuNote(cpu0, takeCPU(p.serverPid, p.db), replayCount)
	results = append(results, result{name: nameReplay, rate: replayRate, count: replayCount, note: join(replayNote, cpuReplay), peer: namePgConflict, target: 0.5,
		serverCPU: srvReplay, pgCPU: pgReplay})

	logf("SubmitJobs, %d items per call, %d concurrent calls, for %s", c.batchSize, c.batchConc, c.duration)
	before = after
	// The keys are new in every round of -before.
	cpu0 = takeCPU(p.serverPid, p.db)
	brep, err := runBatches(ctx, addr, c.batchConc, c.batchSize, filler, "batch-"+strconv.FormatInt(time.Now().UnixNano(), 36), c.duration)
	cpuBatch, srvBatch, pgBatch := cpuNote(cpu0, takeCPU(p.serverPid, p.db), uint64(brep.items))
	if err != nil {
		return nil, err
	}
	if after, err = psqlInt(ctx, dbURL, `SELECT count(*) FROM jobs`); err != nil {
		return nil, err
	}
	if after-before != brep.items {
		return nil, fmt.Errorf("batch phase: %d items created but %d new jobs", brep.items, after-before)
	}
	results = append(results, result{name: nameBatch, rate: float64(brep.items) / brep.elapsed.Seconds(), count: uint64(brep.items),
		note: join(batchNote(brep), cpuBatch), peer: nameRiver, target: 1.0, serverCPU: srvBatch, pgCPU: pgBatch})
	return results, nil
}

// postgres runs the peers straight on Postgres: pgbench's insert, ON
// CONFLICT and COPY into the twins, River's InsertMany, and with
// -pgbench-full one submission's write statement.
func (p *phases) postgres(ctx context.Context) ([]result, error) {
	c, dbURL, tmp, filler := p.c, p.dbURL, p.tmp, p.filler
	var results []result
	// pgbench's rows look like the server's: the values of one job it wrote.
	sample, err := psql(ctx, dbURL, `SELECT row_to_json(j) FROM jobs j WHERE idempotency_key LIKE 'new-%' LIMIT 1`)
	if err != nil {
		return nil, err
	}
	var row map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(sample)), &row); err != nil {
		return nil, fmt.Errorf("sample job row: %w", err)
	}

	logf("pgbench, single-row insert into pgbench_jobs, -c %d -j %d for %s", c.concurrency, c.pgbenchJobs, c.duration)
	tps, n, err := pgbenchScript(ctx, c, dbURL, tmp, "insert.sql", insertJobScript(row), c.concurrency)
	if err != nil {
		return nil, err
	}
	results = append(results, result{name: namePgInsert, rate: tps, count: n})

	logf("pgbench, INSERT ... ON CONFLICT DO NOTHING of existing keys into pgbench_keys, -c %d for %s", c.concurrency, c.duration)
	tps, n, err = pgbenchScript(ctx, c, dbURL, tmp, "conflict.sql", conflictScript(c.replayKeys), c.concurrency)
	if err != nil {
		return nil, err
	}
	results = append(results, result{name: namePgConflict, rate: tps, count: n})

	logf("River InsertMany, %d jobs per call, %d concurrent callers, for %s", c.batchSize, c.batchConc, c.duration)
	inserted, elapsed, err := riverInsertMany(ctx, p.riverURL, c.batchConc, c.batchSize, filler, c.duration)
	if err != nil {
		return nil, err
	}
	results = append(results, result{name: nameRiver, rate: float64(inserted) / elapsed.Seconds(), count: uint64(inserted)})

	logf("pgbench, COPY of %d rows into pgbench_jobs_copy, -c %d for %s", c.batchSize, c.batchConc, c.duration)
	csvPath := filepath.Join(tmp, "rows.csv")
	if err := os.WriteFile(csvPath, []byte(copyRows(row, filler, c.batchSize)), 0o644); err != nil {
		return nil, err
	}
	tps, n, err = pgbenchScript(ctx, c, dbURL, tmp, "copy.sql", copyScript(csvPath), uint(c.batchConc))
	if err != nil {
		return nil, err
	}
	results = append(results, result{name: namePgCopy, rate: tps * float64(c.batchSize), count: n * uint64(c.batchSize)})

	if c.pgbenchFull {
		logf("reference: pgbench, one submission's write statement (4 tables), -c %d for %s", c.concurrency, c.duration)
		tps, n, err := pgbenchScript(ctx, c, dbURL, tmp, "submit.sql", submitScript(row, filler), c.concurrency)
		if err != nil {
			return nil, err
		}
		results = append(results, result{name: namePgSubmit, rate: tps, count: n})
	}
	return results, nil
}

// Phase names, also the peers' names in results.
const (
	nameNewKey         = "SubmitJob, new keys"
	nameReplay         = "SubmitJob, replays"
	nameBatch          = "SubmitJobs, items"
	namePgInsert       = "pgbench 1-row insert into jobs twin"
	namePgConflict     = "pgbench ON CONFLICT DO NOTHING, existing key"
	nameRiver          = "River InsertMany, jobs"
	namePgCopy         = "pgbench COPY into jobs twin, rows"
	namePgSubmit       = "pgbench one submission's write (reference)"
	nameEmbeddedNewKey = "embedded: SubmitJob, new keys"
	nameEmbeddedBatch  = "embedded: SubmitJobs, items"
)

// embeddedPhases starts the server on the embedded store and measures
// SubmitJob with new keys and SubmitJobs batches.
func embeddedPhases(ctx context.Context, c config, bin, tmp, filler, newBody string) ([]result, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dataDir := filepath.Join(tmp, "embedded-data")
	srv, err := startServer(ctx, bin, c.serverArgs("--data-dir", dataDir, "--grpc-addr", addr), filepath.Join(tmp, "server-embedded.log"))
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	logf("embedded server pid %d on %s, data in %s", srv.cmd.Process.Pid, addr, dataDir)
	g := &ghz{root: c.root, addr: addr, conc: c.concurrency, conns: c.connections}
	if c.warmup > 0 {
		logf("embedded warmup: new keys for %s", c.warmup)
		if _, err := g.run(ctx, "embedded-warmup", newBody, `{"idempotency-key":"warm-{{.UUID}}"}`, runner.WithRunDuration(c.warmup)); err != nil {
			return nil, err
		}
	}
	logf("embedded: SubmitJob, new keys, -c %d for %s", c.concurrency, c.duration)
	rate, count, note, err := c.newKeys(ctx, g, addr, newBody, filler, "new")
	if err != nil {
		return nil, err
	}
	out := []result{{name: nameEmbeddedNewKey, rate: rate, count: count, note: note, target: 2000}}

	logf("embedded: SubmitJobs, %d items per call, %d concurrent calls, for %s", c.batchSize, c.batchConc, c.duration)
	brep, err := runBatches(ctx, addr, c.batchConc, c.batchSize, filler, "batch", c.duration)
	if err != nil {
		return nil, err
	}
	out = append(out, result{name: nameEmbeddedBatch, rate: float64(brep.items) / brep.elapsed.Seconds(), count: uint64(brep.items),
		note: batchNote(brep), target: 20000})
	return out, nil
}

// newKeys runs SubmitJob with a new key and document per call for the
// phase's duration, with the -client load generator, and returns the rate,
// the calls made and their latencies.
func (c config) newKeys(ctx context.Context, g *ghz, addr, ghzBody, filler, prefix string) (float64, uint64, string, error) {
	if c.client == "ghz" {
		rep, err := g.run(ctx, prefix, ghzBody, `{"idempotency-key":"`+prefix+`-{{.UUID}}"}`, runner.WithRunDuration(c.duration))
		if err != nil {
			return 0, 0, "", err
		}
		return rep.Rps, rep.Count, latencies(rep), nil
	}
	key, text := newKeyCalls(prefix+"-"+strconv.FormatInt(time.Now().UnixNano(), 36), filler)
	rep, err := runSingles(ctx, addr, int(c.concurrency), c.duration, key, text, outcomeCreated)
	if err != nil {
		return 0, 0, "", err
	}
	return rep.rate(), uint64(rep.count), rep.note(), nil
}

// replays runs SubmitJob on the replay keys (replay-0..replay-N-1, document
// text) for the phase's duration; every call must be EXISTING.
func (c config) replays(ctx context.Context, g *ghz, addr, ghzBody, text string) (float64, uint64, string, error) {
	if c.client == "ghz" {
		// ghz's CLI templates have no modulo (and v0.93 checks metadata
		// templates without custom funcs), so the key comes from a metadata
		// provider: replay-(request number mod replay-keys).
		replayMD := func(cd *runner.CallData) (*metadata.MD, error) {
			md := metadata.Pairs("idempotency-key", fmt.Sprintf("replay-%d", cd.RequestNumber%int64(c.replayKeys)))
			return &md, nil
		}
		rep, err := g.run(ctx, "replay", ghzBody, "", runner.WithMetadataProvider(replayMD), runner.WithRunDuration(c.duration))
		if err != nil {
			return 0, 0, "", err
		}
		return rep.Rps, rep.Count, latencies(rep), nil
	}
	key := func(n int64) string { return "replay-" + strconv.FormatInt(n%int64(c.replayKeys), 10) }
	rep, err := runSingles(ctx, addr, int(c.concurrency), c.duration, key, func(int64) string { return text }, outcomeExisting)
	if err != nil {
		return 0, 0, "", err
	}
	return rep.rate(), uint64(rep.count), rep.note(), nil
}

// serverArgs are the arguments of `oncejob serve`: API only (no workers:
// they would compete for the CPU with what is measured), the log level,
// and the group commit's linger when set.
func (c config) serverArgs(args ...string) []string {
	args = append([]string{"serve", "--workers", "0", "--http-addr", "", "--log-level", c.logLevel}, args...)
	if c.linger > 0 {
		args = append(args, "--submit-linger", c.linger.String())
	}
	return args
}

func batchNote(r *batchReport) string {
	sort.Slice(r.latencies, func(i, j int) bool { return r.latencies[i] < r.latencies[j] })
	p := func(q float64) time.Duration { return r.latencies[int(q*float64(len(r.latencies)-1))] }
	return fmt.Sprintf("%d calls, p50 %s p99 %s", r.calls, p(0.5).Round(100*time.Microsecond), p(0.99).Round(100*time.Microsecond))
}

// printResults prints every phase with its ratio to its peer, or to its
// absolute target, and returns the targets missed.
func printResults(w *os.File, c config, rs []result) []string {
	fmt.Fprintf(w, "\nconcurrency %d (batches: %d x %d items), %s per phase, document %d bytes (unique per new key: %v), SubmitJob client %s, server pool_max_conns %s\n\n",
		c.concurrency, c.batchConc, c.batchSize, c.duration, c.docBytes, c.uniqueDocs, c.client, poolDesc(c.poolMaxConns))
	byName := make(map[string]result, len(rs))
	for _, r := range rs {
		byName[r.name] = r
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "phase\t ops\t rate/s\t compared with\t ratio\t target\t \t latency\t")
	var missed []string
	for _, r := range rs {
		var against, ratio, target, verdict string
		switch peer, ok := byName[r.peer]; {
		case r.peer != "" && ok:
			x := r.rate / peer.rate
			against, ratio, target = peer.name, fmt.Sprintf("%.2f", x), fmt.Sprintf(">= %.2f", r.target)
			verdict = "met"
			if x < r.target {
				verdict = "NOT MET"
				missed = append(missed, fmt.Sprintf("%s %.2fx %s (target %.2fx)", r.name, x, peer.name, r.target))
			}
		case r.target > 0:
			against, ratio, target = "target", fmt.Sprintf("%.2f", r.rate/r.target), fmt.Sprintf(">= %.0f/s", r.target)
			verdict = "met"
			if r.rate < r.target {
				verdict = "NOT MET"
				missed = append(missed, fmt.Sprintf("%s %.0f/s (target %.0f/s)", r.name, r.rate, r.target))
			}
		}
		fmt.Fprintf(tw, "%s\t %d\t %.0f\t %s\t %s\t %s\t %s\t %s\t\n", r.name, r.count, r.rate, against, ratio, target, verdict, r.note)
	}
	tw.Flush()
	return missed
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

func latencies(r *runner.Report) string {
	var parts []string
	for _, l := range r.LatencyDistribution {
		if l.Percentage == 50 || l.Percentage == 99 {
			parts = append(parts, fmt.Sprintf("p%d %s", l.Percentage, l.Latency.Round(10*time.Microsecond)))
		}
	}
	return strings.Join(parts, " ")
}

// ghz runs SubmitJob with ghz's runner.
type ghz struct {
	root  string
	addr  string
	conc  uint
	conns uint
}

func (g *ghz) run(ctx context.Context, name, data, md string, extra ...runner.Option) (*runner.Report, error) {
	opts := []runner.Option{
		runner.WithProtoFile(filepath.Join(g.root, "proto/oncejob/v1/job.proto"),
			[]string{filepath.Join(g.root, "proto"), filepath.Join(g.root, "third_party/googleapis")}),
		runner.WithInsecure(true),
		runner.WithConcurrency(g.conc),
		runner.WithConnections(g.conns),
		runner.WithDurationStopAction("wait"), // let in-flight calls finish: no spurious cancellations
		runner.WithDataFromJSON(data),
		runner.WithTimeout(20 * time.Second),
	}
	if md != "" {
		opts = append(opts, runner.WithMetadataFromJSON(md))
	}
	opts = append(opts, extra...)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep, err := runner.Run(submitCall, g.addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("ghz %s: %w", name, err)
	}
	if bad := ghzErrors(rep); bad != "" {
		return nil, fmt.Errorf("ghz %s: %d calls, errors: %s", name, rep.Count, bad)
	}
	if rep.Count == 0 {
		return nil, fmt.Errorf("ghz %s: no calls completed", name)
	}
	rep.Details = nil
	return rep, nil
}

func ghzErrors(r *runner.Report) string {
	var parts []string
	for code, n := range r.StatusCodeDist {
		if code != "OK" {
			parts = append(parts, fmt.Sprintf("%s=%d", code, n))
		}
	}
	for msg, n := range r.ErrorDist {
		parts = append(parts, fmt.Sprintf("%q x%d", msg, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func submitBody(text string) string {
	b, _ := json.Marshal(map[string]any{
		"pipeline": "summarize",
		"document": map[string]any{"text": text},
	})
	return string(b)
}

// insertJobScript is the pgbench twin of the jobs insert: one row, the
// columns JobSubmit sets, the values of a real job, a new id and key.
func insertJobScript(row map[string]any) string {
	return fmt.Sprintf(`INSERT INTO pgbench_jobs (
    id, tenant, idempotency_key, dedup_key, pipeline, pipeline_version,
    prompt_version, model_profile, status, stage, output, deduplicated_from,
    document_sha256, document_media_type, document_name, document_size_bytes,
    params, labels, finished_at)
VALUES (gen_random_uuid(), %s, 'pgb-' || gen_random_uuid()::text, %s, %s, %s,
    %s, %s, 'queued', 'uploaded', NULL, NULL,
    %s, %s, %s, %s,
    %s::jsonb, %s::jsonb, NULL);
`,
		lit(row["tenant"]), lit(row["dedup_key"]), lit(row["pipeline"]), lit(row["pipeline_version"]),
		lit(row["prompt_version"]), lit(row["model_profile"]),
		lit(row["document_sha256"]), lit(row["document_media_type"]), lit(row["document_name"]), lit(row["document_size_bytes"]),
		litJSON(row["params"]), litJSON(row["labels"]))
}

// conflictScript is the read path of an insert-or-return: an INSERT ... ON
// CONFLICT DO NOTHING of a key that exists (one of the replay keys, copied
// into pgbench_keys), as SubmitJob's replays find theirs.
func conflictScript(keys int) string {
	return fmt.Sprintf(`\set k random(0, %d)
INSERT INTO pgbench_keys (tenant, method, idem_key, fingerprint, job_id)
VALUES ('default', '/oncejob.v1.JobService/SubmitJob', 'replay-' || :k, 'fp', gen_random_uuid())
ON CONFLICT DO NOTHING;
`, keys-1)
}

// copyScript copies the rows of csvPath into pgbench_jobs_copy: one COPY
// per transaction. The server reads the file (pgbench runs as a
// superuser on the same machine).
func copyScript(csvPath string) string {
	// NULL is \N, so an empty field (document_name) is an empty string.
	return fmt.Sprintf("COPY pgbench_jobs_copy (%s) FROM %s WITH (FORMAT csv, NULL '\\N');\n", copyColumns, lit(csvPath))
}

// copyColumns are the columns SubmitJob sets, as insertJobScript's.
const copyColumns = "tenant, idempotency_key, dedup_key, pipeline, pipeline_version, prompt_version, model_profile, " +
	"status, stage, document_sha256, document_media_type, document_name, document_size_bytes, params, labels"

// copyRows is n rows shaped like the job row, each with its own key, dedup
// key and document hash, as CSV.
func copyRows(row map[string]any, filler string, n int) string {
	var b strings.Builder
	w := csv.NewWriter(&b)
	for i := range n {
		key := fmt.Sprintf("copy-%d", i)
		params, _ := json.Marshal(row["params"])
		labels, _ := json.Marshal(row["labels"])
		_ = w.Write([]string{
			fmt.Sprint(row["tenant"]), key, "dedup:v1:" + key, fmt.Sprint(row["pipeline"]), fmt.Sprint(row["pipeline_version"]),
			fmt.Sprint(row["prompt_version"]), fmt.Sprint(row["model_profile"]), "queued", "uploaded",
			fmt.Sprintf("%064x", i), fmt.Sprint(row["document_media_type"]), fmt.Sprint(row["document_name"]),
			strconv.Itoa(len(key) + 1 + len(filler)), string(params), string(labels),
		})
	}
	w.Flush()
	return b.String()
}

// submitScript is the write of one submission (store/storepg's
// JobSubmitMany statement for one row, written as the single-row CTE it
// reduces to) with literal values: a new key, job id and document (and so
// dedup key) per transaction. It measures what Postgres alone does with one
// submission's write, one commit each.
func submitScript(row map[string]any, filler string) string {
	return fmt.Sprintf(`WITH p AS (
    SELECT gen_random_uuid() AS id, convert_to(gen_random_uuid()::text || ' ' || %[1]s, 'UTF8') AS data
),
params AS (
    SELECT p.id, p.data, encode(sha256(p.data), 'hex') AS sha, 'dedup-bench-' || p.id::text AS dedup_key,
        'fp-bench-' || p.id::text AS fingerprint, 'pgb-' || p.id::text AS idem_key
    FROM p
),
idem AS (
    INSERT INTO idempotency_keys (tenant, method, idem_key, fingerprint, job_id)
    SELECT %[2]s, '/oncejob.v1.JobService/SubmitJob', idem_key, fingerprint, id FROM params
    ON CONFLICT DO NOTHING
    RETURNING job_id
),
document AS (
    INSERT INTO documents (tenant, sha256, media_type, data, size_bytes)
    SELECT %[2]s, params.sha, %[3]s, params.data, length(params.data)
    FROM idem, params
    ON CONFLICT DO NOTHING
),
source AS (
    SELECT jobs.id, jobs.output
    FROM jobs, params
    WHERE jobs.tenant = %[2]s
        AND jobs.dedup_key = params.dedup_key
        AND jobs.status = 'succeeded'
        AND jobs.deduplicated_from IS NULL
),
job AS (
    INSERT INTO jobs (
        id, tenant, idempotency_key, dedup_key, pipeline, pipeline_version,
        prompt_version, model_profile, status, stage, output, deduplicated_from,
        document_sha256, document_media_type, document_name, document_size_bytes,
        params, labels, finished_at
    )
    SELECT idem.job_id, %[2]s, params.idem_key, params.dedup_key,
        %[4]s, %[5]s, %[6]s, %[7]s,
        CASE WHEN source.id IS NULL THEN 'queued' ELSE 'succeeded' END,
        CASE WHEN source.id IS NULL THEN 'uploaded' ELSE 'published' END,
        source.output, source.id,
        params.sha, %[3]s, %[8]s, length(params.data), %[9]s::jsonb, %[10]s::jsonb,
        CASE WHEN source.id IS NULL THEN NULL ELSE now() END
    FROM idem CROSS JOIN params
    LEFT JOIN source ON true
    RETURNING *
),
event AS (
    INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt, message)
    SELECT job.id, job.tenant, 1, job.status, job.stage, job.attempt,
        CASE WHEN job.deduplicated_from IS NULL THEN 'submitted'
            ELSE 'deduplicated from ' || job.deduplicated_from::text END
    FROM job
)
SELECT * FROM job;
`,
		lit(filler), lit(row["tenant"]), lit(row["document_media_type"]),
		lit(row["pipeline"]), lit(row["pipeline_version"]), lit(row["prompt_version"]), lit(row["model_profile"]),
		lit(row["document_name"]), litJSON(row["params"]), litJSON(row["labels"]))
}

// lit is a SQL literal of a JSON-decoded value, safe in a pgbench script.
func lit(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		// An E'' literal with colons as \x3a: pgbench would take ":name"
		// for one of its variables, even inside quotes.
		r := strings.NewReplacer(`\`, `\\`, "'", "''", ":", `\x3a`)
		return "E'" + r.Replace(v) + "'"
	default:
		return lit(fmt.Sprint(v))
	}
}

func litJSON(v any) string {
	b, _ := json.Marshal(v)
	return lit(string(b))
}

var (
	tpsRe    = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	txRe     = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)`)
	failedRe = regexp.MustCompile(`(?m)^number of failed transactions: (\d+)`)
)

// pgbenchScript writes script to dir/name and runs it with pgbench -c
// clients for the phase's duration; it returns transactions per second and
// the transactions made.
func pgbenchScript(ctx context.Context, c config, dbURL, dir, name, script string, clients uint) (float64, uint64, error) {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		return 0, 0, err
	}
	secs := int(c.duration.Round(time.Second).Seconds())
	out, err := cmdOutput(ctx, "", "pgbench", "-n", "-M", "prepared", "-f", path,
		"-c", strconv.Itoa(int(clients)), "-j", strconv.Itoa(min(c.pgbenchJobs, int(clients))), "-T", strconv.Itoa(max(secs, 1)), dbURL)
	if err != nil {
		return 0, 0, fmt.Errorf("pgbench: %w\n%s", err, out)
	}
	m := tpsRe.FindStringSubmatch(out)
	t := txRe.FindStringSubmatch(out)
	if m == nil || t == nil {
		return 0, 0, fmt.Errorf("pgbench: no tps in output:\n%s", out)
	}
	if f := failedRe.FindStringSubmatch(out); f != nil && f[1] != "0" {
		return 0, 0, fmt.Errorf("pgbench: %s failed transactions:\n%s", f[1], out)
	}
	tps, _ := strconv.ParseFloat(m[1], 64)
	n, _ := strconv.ParseUint(t[1], 10, 64)
	return tps, n, nil
}

type server struct {
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan error
	stopped sync.Once // stop runs once: run stops the server early and defers it too
}

// startServer starts `oncejob` with args and waits until the address after
// --grpc-addr in them accepts connections.
func startServer(ctx context.Context, bin string, args []string, logPath string) (*server, error) {
	var addr string
	for i, a := range args[:len(args)-1] {
		if a == "--grpc-addr" {
			addr = args[i+1]
		}
	}
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start server: %w", err)
	}
	s := &server{cmd: cmd, logPath: logPath, logFile: lf, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-s.done:
			s.done <- err
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("server exited: %v\n%s", err, log)
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("server did not listen within 30s")
		}
	}
}

func (s *server) stop() {
	s.stopped.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		s.logFile.Close()
	})
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func psql(ctx context.Context, dbURL, sql string) (string, error) {
	out, err := cmdOutput(ctx, "", "psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", dbURL, "-c", sql)
	if err != nil {
		return "", fmt.Errorf("psql %q: %w\n%s", sql, err, out)
	}
	return out, nil
}

func psqlInt(ctx context.Context, dbURL, sql string) (int, error) {
	out, err := psql(ctx, dbURL, sql)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

func cmdRun(ctx context.Context, dir string, name string, args ...string) error {
	out, err := cmdOutput(ctx, dir, name, args...)
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, out)
	}
	return nil
}

func cmdOutput(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.String(), err
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

func envDuration(k string, def time.Duration) time.Duration {
	if v := os.Getenv(k); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
		fmt.Fprintf(os.Stderr, "bench: ignoring %s=%q: not a duration\n", k, v)
	}
	return def
}

// join joins the non-empty of notes with ", ".
func join(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, ", ")
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}
