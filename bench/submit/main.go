// Command submit measures SubmitJob throughput against pgbench on the same
// Postgres.
//
// In one run it builds and starts the real oncejob server on a throwaway
// database, drives SubmitJob with ghz (github.com/bojand/ghz, used as a
// library) at a fixed concurrency with a new idempotency key per call, then
// with existing keys (replays), then runs pgbench with a single-row insert
// into a table shaped like jobs at the same concurrency, and prints the rates
// and the ratios. The phases run one after another for the same duration, so
// they do not share the machine with each other.
//
//	cd bench && go run ./submit            # defaults: -c 32 -duration 15s
//	cd bench && go run ./submit -h         # every knob
//
// It exits non-zero if any call or transaction failed, if a replay created a
// job, or, with -strict, if new-key SubmitJob is below -target x pgbench.
package main

import (
	"bufio"
	"bytes"
	"context"
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
	target       float64
	strict       bool
	keep         bool
	perfOut      string
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
	flag.Float64Var(&c.target, "target", 0.5, "target ratio new-key SubmitJob / pgbench")
	flag.BoolVar(&c.strict, "strict", false, "exit 1 if the target ratio is not met")
	flag.BoolVar(&c.keep, "keep", false, "keep the database and the temp dir (server log, pgbench scripts)")
	flag.StringVar(&c.perfOut, "perf", "", "if set, `perf record -a -g` (whole machine: server, Postgres, ghz) during the new-key phase into this file")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench: FAIL:", err)
		os.Exit(1)
	}
}

type result struct {
	name  string
	rate  float64
	count uint64
	note  string
}

func run(ctx context.Context, c config) error {
	if c.root == "" {
		r, err := findRoot()
		if err != nil {
			return err
		}
		c.root = r
	}
	tmp, err := os.MkdirTemp("", "oncejob-bench-")
	if err != nil {
		return err
	}
	if c.keep {
		logf("temp dir %s (kept)", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}

	logf("building the server from %s", c.root)
	bin := filepath.Join(tmp, "oncejob")
	if err := cmdRun(ctx, c.root, "go", "build", "-o", bin, "./cmd/oncejob"); err != nil {
		return fmt.Errorf("build server: %w", err)
	}

	adminURL := c.pgURL + "/postgres"
	dbURL := c.pgURL + "/" + c.db + "?sslmode=disable"
	logf("recreating database %s", c.db)
	if _, err := psql(ctx, adminURL, fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, c.db)); err != nil {
		return err
	}
	if _, err := psql(ctx, adminURL, fmt.Sprintf(`CREATE DATABASE %q`, c.db)); err != nil {
		return err
	}
	if !c.keep {
		defer func() {
			_, _ = psql(context.Background(), adminURL, fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, c.db))
		}()
	}

	serverURL := dbURL
	if c.poolMaxConns > 0 {
		serverURL += "&pool_max_conns=" + strconv.Itoa(c.poolMaxConns)
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	srv, err := startServer(ctx, bin, serverURL, addr, c.logLevel, filepath.Join(tmp, "server.log"))
	if err != nil {
		return err
	}
	defer srv.stop()
	logf("server pid %d on %s (log %s)", srv.cmd.Process.Pid, addr, srv.logPath)

	// The pgbench twin of jobs: same columns, types, defaults, checks and
	// indexes (LIKE ... INCLUDING ALL), no foreign keys.
	if _, err := psql(ctx, dbURL, `CREATE TABLE pgbench_jobs (LIKE jobs INCLUDING ALL)`); err != nil {
		return err
	}

	g := &ghz{root: c.root, addr: addr, conc: c.concurrency, conns: c.connections}
	filler := strings.Repeat("x", max(0, c.docBytes-40))
	newBody := submitBody("fixed " + filler)
	if c.uniqueDocs {
		newBody = submitBody("{{.UUID}} " + filler)
	}
	replayBody := submitBody("replay " + filler)

	if c.warmup > 0 {
		logf("warmup: new keys for %s", c.warmup)
		if _, err := g.run(ctx, "warmup", newBody, `{"idempotency-key":"warm-{{.UUID}}"}`, runner.WithRunDuration(c.warmup)); err != nil {
			return err
		}
	}

	logf("creating %d keys for the replay phase", c.replayKeys)
	if _, err := g.run(ctx, "replay-setup", replayBody, `{"idempotency-key":"replay-{{.RequestNumber}}"}`,
		runner.WithTotalRequests(uint(c.replayKeys)), runner.WithConcurrency(1)); err != nil {
		return err
	}
	if n, err := psqlInt(ctx, dbURL, `SELECT count(*) FROM jobs WHERE idempotency_key LIKE 'replay-%'`); err != nil {
		return err
	} else if n != c.replayKeys {
		return fmt.Errorf("replay setup made %d jobs, want %d", n, c.replayKeys)
	}

	var results []result
	loadBefore := loadavg()

	logf("phase 1: SubmitJob, new keys, -c %d for %s", c.concurrency, c.duration)
	var perf *exec.Cmd
	if c.perfOut != "" {
		perf = exec.CommandContext(ctx, "perf", "record", "-a", "-g", "-o", c.perfOut,
			"--", "sleep", strconv.Itoa(int(c.duration.Seconds())))
		perf.Stdout, perf.Stderr = os.Stderr, os.Stderr
		if err := perf.Start(); err != nil {
			return fmt.Errorf("perf: %w", err)
		}
	}
	before, err := psqlInt(ctx, dbURL, `SELECT count(*) FROM jobs`)
	if err != nil {
		return err
	}
	rep, err := g.run(ctx, "new-key", newBody, `{"idempotency-key":"new-{{.UUID}}"}`, runner.WithRunDuration(c.duration))
	if err != nil {
		return err
	}
	if perf != nil {
		_ = perf.Wait()
	}
	after, err := psqlInt(ctx, dbURL, `SELECT count(*) FROM jobs`)
	if err != nil {
		return err
	}
	if uint64(after-before) != rep.Count {
		return fmt.Errorf("new-key phase: %d OK calls but %d new jobs", rep.Count, after-before)
	}
	results = append(results, result{"SubmitJob, new keys (ghz)", rep.Rps, rep.Count, latencies(rep)})

	logf("phase 2: SubmitJob, existing keys (replays), -c %d for %s", c.concurrency, c.duration)
	before = after
	// ghz's CLI templates have no modulo (and v0.93 checks metadata templates
	// without custom funcs), so the key comes from a metadata provider:
	// replay-(request number mod replay-keys), keys the setup created.
	replayMD := func(cd *runner.CallData) (*metadata.MD, error) {
		md := metadata.Pairs("idempotency-key", fmt.Sprintf("replay-%d", cd.RequestNumber%int64(c.replayKeys)))
		return &md, nil
	}
	rep, err = g.run(ctx, "replay", replayBody, "", runner.WithMetadataProvider(replayMD), runner.WithRunDuration(c.duration))
	if err != nil {
		return err
	}
	if after, err = psqlInt(ctx, dbURL, `SELECT count(*) FROM jobs`); err != nil {
		return err
	}
	if after != before {
		return fmt.Errorf("replay phase created %d jobs: the replays were not replays", after-before)
	}
	results = append(results, result{"SubmitJob, existing keys (ghz)", rep.Rps, rep.Count, latencies(rep)})

	// pgbench inserts rows that look like the server's: the values of one job
	// it wrote, with a fresh id and key per transaction.
	sample, err := psql(ctx, dbURL, `SELECT row_to_json(j) FROM jobs j WHERE idempotency_key LIKE 'new-%' LIMIT 1`)
	if err != nil {
		return err
	}
	var row map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(sample)), &row); err != nil {
		return fmt.Errorf("sample job row: %w", err)
	}

	logf("phase 3: pgbench, single-row insert into pgbench_jobs, -c %d -j %d for %s", c.concurrency, c.pgbenchJobs, c.duration)
	script := filepath.Join(tmp, "insert.sql")
	if err := os.WriteFile(script, []byte(insertJobScript(row)), 0o644); err != nil {
		return err
	}
	tps, n, err := pgbench(ctx, c, dbURL, script)
	if err != nil {
		return err
	}
	results = append(results, result{"pgbench, 1-row insert into jobs twin", tps, n, ""})
	pgTPS := tps

	if c.pgbenchFull {
		logf("reference: pgbench, the whole JobSubmit statement (4 tables), -c %d -j %d for %s", c.concurrency, c.pgbenchJobs, c.duration)
		script := filepath.Join(tmp, "submit.sql")
		if err := os.WriteFile(script, []byte(submitScript(row, filler)), 0o644); err != nil {
			return err
		}
		tps, n, err := pgbench(ctx, c, dbURL, script)
		if err != nil {
			return err
		}
		results = append(results, result{"pgbench, JobSubmit statement (reference)", tps, n, ""})
	}

	printResults(os.Stdout, c, results, pgTPS)
	fmt.Printf("load average (1m) before/after the measured phases: %s / %s on %d CPUs; the phases share the machine with whatever else runs, so compare on a quiet one\n",
		loadBefore, loadavg(), runtime.NumCPU())
	ratio := results[0].rate / pgTPS
	if c.strict && ratio < c.target {
		return fmt.Errorf("new-key SubmitJob is %.2fx pgbench, target %.2fx", ratio, c.target)
	}
	return nil
}

func printResults(w *os.File, c config, rs []result, pgTPS float64) {
	fmt.Fprintf(w, "\nconcurrency %d, %s per phase, document %d bytes (unique per new key: %v), server pool_max_conns %s\n\n",
		c.concurrency, c.duration, c.docBytes, c.uniqueDocs, poolDesc(c.poolMaxConns))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "phase\t ops\t rate/s\t x pgbench\t latency\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t %d\t %.0f\t %.2f\t %s\t\n", r.name, r.count, r.rate, r.rate/pgTPS, r.note)
	}
	tw.Flush()
	ratio := rs[0].rate / pgTPS
	verdict := "MET"
	if ratio < c.target {
		verdict = "NOT MET"
	}
	fmt.Fprintf(w, "\nnew-key SubmitJob / pgbench = %.2f (target >= %.2f: %s)\n", ratio, c.target, verdict)
	fmt.Fprintf(w, "replay SubmitJob / pgbench  = %.2f\n", rs[1].rate/pgTPS)
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
		runner.WithProtoFile(filepath.Join(g.root, "proto/oncejob/v1/job.proto"), []string{filepath.Join(g.root, "proto")}),
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

// submitScript is store/storepg's JobSubmit statement with literal values:
// a new key, job id and document (and so dedup key) per transaction. It
// measures what Postgres alone can do with the server's write.
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

func pgbench(ctx context.Context, c config, dbURL, script string) (float64, uint64, error) {
	secs := int(c.duration.Round(time.Second).Seconds())
	out, err := cmdOutput(ctx, "", "pgbench", "-n", "-M", "prepared", "-f", script,
		"-c", strconv.Itoa(int(c.concurrency)), "-j", strconv.Itoa(c.pgbenchJobs), "-T", strconv.Itoa(max(secs, 1)), dbURL)
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
}

func startServer(ctx context.Context, bin, dbURL, addr, logLevel, logPath string) (*server, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--database-url", dbURL, "--migrate", "--grpc-addr", addr, "--log-level", logLevel)
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
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.logFile.Close()
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

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}
