// Command watch measures WatchJob against polling GetJob on the same load.
//
// In one run, for each watcher count (-watchers, default 1000,10000), it:
//
//  1. starts the real `oncejob serve --workers 0` on a throwaway database
//     (so pg_stat_database counts only this load) and submits -jobs jobs;
//
//  2. opens that many WatchJob streams spread evenly over the jobs, waits
//     until each has its backlog, lets them sit idle, and reads the server
//     process's RSS before and after: memory per idle watcher;
//
//  3. makes -rounds transitions of every job through the store (alternately
//     a claim of all jobs in one statement and a move of each to
//     retry_wait), each round once every watcher has the previous one, and
//     records for every delivery the time from the transition's commit
//     (when the store call returned) to its receipt: p50, p99, max;
//
//  4. closes the streams and runs the polling baseline on the same jobs:
//     as many pollers, each calling GetJob every -poll-interval, measuring
//     the same commit-to-detection latency;
//
//  5. for the counts in -sse (default 1000): a fresh server and database,
//     the same jobs, and as many EventSource-style watchers over HTTP (each
//     its own connection, GET /v1/jobs/{id}:watch as text/event-stream),
//     measured as in 2 and 3; then, on another fresh server, gRPC watchers
//     with a connection each, as independent clients (and SSE) have;
//
//  6. reports for every phase the database load it added per second:
//     transactions (xact_commit) and rows read (tup_returned + tup_fetched),
//     and SSE against gRPC: p99 ratio (target <= 1.5) and memory per idle
//     SSE watcher (target <= 64 KiB).
//
//     cd bench/watch && go run .                 # 1,000 and 10,000 watchers, SSE at 1,000
//     cd bench/watch && go run . -watchers 1000 -rounds 10
//
// It is a separate module (replace => ../..) so neither the root module nor
// bench/'s ghz-era dependencies see each other.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
)

type config struct {
	pg           string
	watchers     []int
	jobs         int
	rounds       int
	pollInterval time.Duration
	idle         time.Duration
	conns        int
	sse          map[int]bool
}

func main() {
	var c config
	var watchers, sse string
	flag.StringVar(&c.pg, "pg", envOr("BENCH_PG", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "admin Postgres URL (env BENCH_PG); a database is created and dropped")
	flag.StringVar(&watchers, "watchers", "1000,10000", "watcher counts to run, comma-separated")
	flag.IntVar(&c.jobs, "jobs", 100, "jobs the watchers are spread over")
	flag.IntVar(&c.rounds, "rounds", 20, "transitions of every job per phase")
	flag.DurationVar(&c.pollInterval, "poll-interval", 100*time.Millisecond, "GetJob interval of the polling baseline")
	flag.DurationVar(&c.idle, "idle", 3*time.Second, "how long watchers sit idle before memory is read")
	flag.IntVar(&c.conns, "conns", 0, "client connections; 0: one per 250 watchers")
	flag.StringVar(&sse, "sse", "1000", "watcher counts (of -watchers) that also run the SSE phase, comma-separated; empty: none")
	flag.Parse()
	c.sse = map[int]bool{}
	for _, w := range strings.Split(sse, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(w)); err == nil {
			c.sse[n] = true
		}
	}
	for _, w := range strings.Split(watchers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bad -watchers %q\n", watchers)
			os.Exit(2)
		}
		c.watchers = append(c.watchers, n)
	}
	ctx, stop := signalContext()
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench/watch:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	root, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "oncejob-bench-watch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "oncejob")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/oncejob")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	fmt.Printf("watch bench: %d jobs, %d rounds, polling every %s\n\n", c.jobs, c.rounds, c.pollInterval)
	var results []result
	for _, n := range c.watchers {
		r, err := runOne(ctx, c, bin, n)
		if err != nil {
			return fmt.Errorf("%d watchers: %w", n, err)
		}
		results = append(results, r...)
	}
	fmt.Println()
	fmt.Printf("%-26s %8s %9s %9s %9s %9s %10s %11s %12s %9s\n", "phase", "samples", "p50", "p99", "max", "xact/s", "rows/s", "xact/round", "rows/round", "KiB/idle")
	for _, r := range results {
		mem := "-"
		if r.memPerWatcher > 0 {
			mem = fmt.Sprintf("%.1f", r.memPerWatcher/1024)
		}
		fmt.Printf("%-26s %8d %9s %9s %9s %9.0f %10.0f %11.0f %12.0f %9s\n", r.name, len(r.latencies), pct(r.latencies, 50), pct(r.latencies, 99), pct(r.latencies, 100),
			r.xactPerSec, r.rowsPerSec, r.xactPerRound, r.rowsPerRound, mem)
	}
	printSSEComparison(results)
	return nil
}

// printSSEComparison sets each SSE phase against the gRPC phase of the
// same watcher count.
func printSSEComparison(results []result) {
	byName := map[string]result{}
	for _, r := range results {
		byName[r.name] = r
	}
	for _, r := range results {
		n, ok := strings.CutPrefix(r.name, "SSE WatchJob x")
		if !ok {
			continue
		}
		fmt.Println()
		for _, peer := range []struct{ name, what string }{
			{"WatchJob x" + n, "gRPC, streams multiplexed on one connection per 250"},
			{"WatchJob x" + n + " own conns", "gRPC, a connection per watcher"},
		} {
			g, ok := byName[peer.name]
			if !ok {
				continue
			}
			ratio := float64(quantile(r.latencies, 99)) / float64(quantile(g.latencies, 99))
			fmt.Printf("SSE vs %s, %s watchers: p99 %s vs %s = %.2fx (target <= 1.5x: %s); %.1f KiB per idle SSE watcher vs %.1f (target <= 64 KiB: %s)\n",
				peer.what, n, pct(r.latencies, 99), pct(g.latencies, 99), ratio, verdict(ratio <= 1.5),
				r.memPerWatcher/1024, g.memPerWatcher/1024, verdict(r.memPerWatcher <= 64*1024))
		}
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

type result struct {
	name          string
	latencies     []time.Duration
	xactPerSec    float64
	rowsPerSec    float64
	xactPerRound  float64
	rowsPerRound  float64
	memPerWatcher float64 // bytes
}

// env is one server on one fresh database with its jobs.
type env struct {
	c        config
	httpBase string // http://addr of the server's HTTP face
	dbURL    string
	admin    *pgx.Conn
	dbName   string
	st       *storepg.Store
	server   *exec.Cmd
	conns    []*grpc.ClientConn
	jobIDs   []string
	owner    string
	claim    bool // the next round claims; else it moves to retry_wait
	leases   map[string]store.Lease
	closed   bool
}

func runOne(ctx context.Context, c config, bin string, watchers int) ([]result, error) {
	e, err := newEnv(ctx, c, bin, watchers)
	if err != nil {
		return nil, err
	}
	defer e.close()

	base, err := e.baselinePhase(ctx)
	if err != nil {
		return nil, err
	}
	w, err := e.watchPhase(ctx, watchers, fmt.Sprintf("WatchJob x%d", watchers))
	if err != nil {
		return nil, err
	}
	p, err := e.pollPhase(ctx, watchers)
	if err != nil {
		return nil, err
	}
	results := []result{base, w, p}
	if !c.sse[watchers] {
		return results, nil
	}
	// A fresh server, so its memory before the watchers is a server's that
	// has served no watcher yet, as in the gRPC phase.
	e.close()
	sse, err := newEnv(ctx, c, bin, watchers)
	if err != nil {
		return nil, err
	}
	defer sse.close()
	s, err := sse.ssePhase(ctx, watchers)
	if err != nil {
		return nil, err
	}
	sse.close()
	// gRPC again, each watcher on a connection of its own as each SSE
	// watcher is (independent clients), on a fresh server too.
	own := c
	own.conns = watchers
	g, err := newEnv(ctx, own, bin, watchers)
	if err != nil {
		return nil, err
	}
	defer g.close()
	o, err := g.watchPhase(ctx, watchers, fmt.Sprintf("WatchJob x%d own conns", watchers))
	if err != nil {
		return nil, err
	}
	return append(results, s, o), nil
}

// baselinePhase makes the rounds with nobody watching: the load of the
// transitions alone, to subtract from the other phases.
func (e *env) baselinePhase(ctx context.Context) (result, error) {
	res := result{name: "transitions only"}
	before, err := e.dbStats(ctx)
	if err != nil {
		return res, err
	}
	start := time.Now()
	if _, err := e.rounds(ctx, &receipts{got: map[key][]time.Time{}}, 0); err != nil {
		return res, err
	}
	err = e.dbRate(ctx, &res, before, time.Since(start))
	return res, err
}

func newEnv(ctx context.Context, c config, bin string, watchers int) (*env, error) {
	e := &env{c: c, dbName: fmt.Sprintf("oncejob_bench_watch_%d", os.Getpid()), owner: "bench", claim: true, leases: map[string]store.Lease{}}
	var err error
	if e.admin, err = pgx.Connect(ctx, c.pg); err != nil {
		return nil, err
	}
	if _, err := e.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+e.dbName); err != nil {
		return nil, err
	}
	if _, err := e.admin.Exec(ctx, "CREATE DATABASE "+e.dbName); err != nil {
		return nil, err
	}
	u, err := url.Parse(c.pg)
	if err != nil {
		return nil, err
	}
	u.Path = "/" + e.dbName
	e.dbURL = u.String()

	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	e.httpBase = "http://" + httpAddr
	e.server = exec.Command(bin, "serve", "--database-url", e.dbURL, "--migrate", "--workers", "0", "--grpc-addr", addr, "--http-addr", httpAddr, "--log-level", "warn")
	logFile, err := os.CreateTemp("", "oncejob-bench-watch-serve-*.log")
	if err != nil {
		return nil, err
	}
	e.server.Stdout, e.server.Stderr = logFile, logFile
	if err := e.server.Start(); err != nil {
		return nil, err
	}
	fmt.Printf("%d watchers: server pid %d on %s, log %s\n", watchers, e.server.Process.Pid, addr, logFile.Name())

	nconns := c.conns
	if nconns == 0 {
		nconns = max(1, watchers/250)
	}
	for range nconns {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
		if err != nil {
			return nil, err
		}
		e.conns = append(e.conns, conn)
	}
	if err := waitHealthy(ctx, e.conns[0]); err != nil {
		return nil, err
	}
	if e.st, err = storepg.Open(ctx, e.dbURL); err != nil {
		return nil, err
	}
	client := oncejobv1.NewJobServiceClient(e.conns[0])
	for i := range c.jobs {
		resp, err := client.SubmitJob(metadata.AppendToOutgoingContext(ctx, "idempotency-key", fmt.Sprintf("bench-%d", i)),
			&oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: fmt.Sprintf("bench document %d", i)}}})
		if err != nil {
			return nil, err
		}
		e.jobIDs = append(e.jobIDs, resp.GetJob().GetId())
	}
	return e, nil
}

// close stops the server and drops the database; a second call does
// nothing.
func (e *env) close() {
	if e.closed {
		return
	}
	e.closed = true
	for _, c := range e.conns {
		_ = c.Close()
	}
	if e.st != nil {
		e.st.Close()
	}
	if e.server != nil && e.server.Process != nil {
		_ = e.server.Process.Signal(syscall.SIGTERM)
		_ = e.server.Wait()
	}
	ctx := context.Background()
	_, _ = e.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+e.dbName+" WITH (FORCE)")
	_ = e.admin.Close(ctx)
}

// transition moves every job once and returns, per job, the status and
// attempt it moved to and when its commit returned.
func (e *env) transition(ctx context.Context) (map[string]commit, error) {
	out := make(map[string]commit, len(e.jobIDs))
	if e.claim {
		jobs, err := e.st.JobClaim(ctx, &store.JobClaimParams{Owner: e.owner, Limit: len(e.jobIDs), LeaseDuration: time.Hour})
		now := time.Now()
		if err != nil {
			return nil, err
		}
		if len(jobs) != len(e.jobIDs) {
			return nil, fmt.Errorf("claimed %d of %d jobs", len(jobs), len(e.jobIDs))
		}
		for _, j := range jobs {
			e.leases[j.ID] = store.Lease{JobID: j.ID, Owner: j.LeaseOwner, Attempt: j.Attempt}
			out[j.ID] = commit{status: oncejobv1.JobStatus_JOB_STATUS_RUNNING, attempt: j.Attempt, at: now}
		}
	} else {
		past := time.Now().Add(-time.Second)
		for _, id := range e.jobIDs {
			j, err := e.st.JobTransition(ctx, &store.JobTransitionParams{Lease: e.leases[id], To: store.JobStatusRetryWait, RunAfter: &past, Message: "bench"})
			if err != nil {
				return nil, err
			}
			out[id] = commit{status: oncejobv1.JobStatus_JOB_STATUS_RETRY_WAIT, attempt: j.Attempt, at: time.Now()}
		}
	}
	e.claim = !e.claim
	return out, nil
}

type commit struct {
	status  oncejobv1.JobStatus
	attempt int32
	at      time.Time
}

type key struct {
	job     string
	status  oncejobv1.JobStatus
	attempt int32
}

// receipts collects (transition, receipt time) from all clients.
type receipts struct {
	mu   sync.Mutex
	got  map[key][]time.Time
	seen atomic.Int64
}

func (r *receipts) add(k key, at time.Time) {
	r.mu.Lock()
	r.got[k] = append(r.got[k], at)
	r.mu.Unlock()
	r.seen.Add(1)
}

// rounds runs the rounds, each once every watcher got the previous one
// (perRound deliveries), and returns the latencies.
func (e *env) rounds(ctx context.Context, r *receipts, perRound int64) ([]time.Duration, error) {
	var commits []map[string]commit
	for i := range e.c.rounds {
		want := r.seen.Load() + perRound
		cs, err := e.transition(ctx)
		if err != nil {
			return nil, err
		}
		commits = append(commits, cs)
		deadline := time.Now().Add(30 * time.Second)
		for r.seen.Load() < want {
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("round %d: %d of %d deliveries after 30s", i, r.seen.Load()-(want-perRound), perRound)
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // let the machine settle between rounds
	}
	var lat []time.Duration
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cs := range commits {
		for id, c := range cs {
			for _, at := range r.got[key{id, c.status, c.attempt}] {
				lat = append(lat, at.Sub(c.at))
			}
		}
	}
	return lat, nil
}

func (e *env) watchPhase(ctx context.Context, watchers int, name string) (result, error) {
	res := result{name: name}
	rssBefore, err := rss(e.server.Process.Pid)
	if err != nil {
		return res, err
	}
	r := &receipts{got: map[key][]time.Time{}}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ready sync.WaitGroup
	var wg sync.WaitGroup
	errs := make(chan error, watchers)
	for i := range watchers {
		ready.Add(1)
		wg.Go(func() {
			client := oncejobv1.NewJobServiceClient(e.conns[i%len(e.conns)])
			stream, err := client.WatchJob(wctx, &oncejobv1.WatchJobRequest{JobId: e.jobIDs[i%len(e.jobIDs)]})
			if err != nil {
				ready.Done()
				errs <- err
				return
			}
			first := true
			for {
				resp, err := stream.Recv()
				if err != nil {
					if first {
						ready.Done()
					}
					if wctx.Err() == nil && !errors.Is(err, io.EOF) {
						errs <- err
					}
					return
				}
				if first {
					ready.Done() // the backlog: subscribed
					first = false
					continue
				}
				ev := resp.GetEvent()
				r.add(key{ev.GetJobId(), ev.GetStatus(), ev.GetAttempt()}, time.Now())
			}
		})
	}
	ready.Wait()
	select {
	case err := <-errs:
		return res, err
	default:
	}
	time.Sleep(e.c.idle)
	rssIdle, err := rss(e.server.Process.Pid)
	if err != nil {
		return res, err
	}
	res.memPerWatcher = float64(rssIdle-rssBefore) / float64(watchers)
	fmt.Printf("  %d idle watchers: server RSS %d -> %d MiB\n", watchers, rssBefore>>20, rssIdle>>20)

	before, err := e.dbStats(ctx)
	if err != nil {
		return res, err
	}
	start := time.Now()
	res.latencies, err = e.rounds(ctx, r, int64(watchers))
	if err != nil {
		return res, err
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	err = e.dbRate(ctx, &res, before, elapsed)
	select {
	case err := <-errs:
		return res, err
	default:
	}
	return res, err
}

func (e *env) pollPhase(ctx context.Context, pollers int) (result, error) {
	res := result{name: fmt.Sprintf("poll GetJob/%s x%d", e.c.pollInterval, pollers)}
	r := &receipts{got: map[key][]time.Time{}}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var calls, failures atomic.Int64
	var ready sync.WaitGroup
	for i := range pollers {
		ready.Add(1)
		wg.Go(func() {
			client := oncejobv1.NewJobServiceClient(e.conns[i%len(e.conns)])
			id := e.jobIDs[i%len(e.jobIDs)]
			// Spread the pollers over the interval, as independent clients are.
			time.Sleep(time.Duration(i) * e.c.pollInterval / time.Duration(pollers))
			ticker := time.NewTicker(e.c.pollInterval)
			defer ticker.Stop()
			var last key
			first := true
			for {
				resp, err := client.GetJob(pctx, &oncejobv1.GetJobRequest{JobId: id})
				calls.Add(1)
				if err != nil {
					if pctx.Err() != nil {
						return
					}
					failures.Add(1)
				} else {
					k := key{id, resp.GetJob().GetStatus(), resp.GetJob().GetAttempt()}
					if first {
						ready.Done()
						first = false
					} else if k != last {
						r.add(k, time.Now())
					}
					last = k
				}
				select {
				case <-ticker.C:
				case <-pctx.Done():
					return
				}
			}
		})
	}
	ready.Wait()
	before, err := e.dbStats(ctx)
	if err != nil {
		return res, err
	}
	callsBefore := calls.Load()
	start := time.Now()
	res.latencies, err = e.rounds(ctx, r, int64(pollers))
	if err != nil {
		return res, err
	}
	elapsed := time.Since(start)
	achieved := float64(calls.Load()-callsBefore) / elapsed.Seconds()
	cancel()
	wg.Wait()
	err = e.dbRate(ctx, &res, before, elapsed)
	fmt.Printf("  polling: %.0f GetJob/s achieved (%d pollers x 1/%s = %.0f/s asked), %d failed\n",
		achieved, pollers, e.c.pollInterval, float64(pollers)/e.c.pollInterval.Seconds(), failures.Load())
	return res, err
}

type dbStats struct{ xact, rows int64 }

func (e *env) dbStats(ctx context.Context) (dbStats, error) {
	// A backend flushes its counters at most once a second while busy and
	// after 10s when idle (Postgres 15+): wait that out, so the snapshot
	// holds all work done before it.
	time.Sleep(11 * time.Second)
	var s dbStats
	err := e.admin.QueryRow(ctx, `SELECT xact_commit, tup_returned + tup_fetched FROM pg_stat_database WHERE datname = $1`, e.dbName).Scan(&s.xact, &s.rows)
	return s, err
}

// dbRate fills res's database load since before: per second of the phase
// and per round.
func (e *env) dbRate(ctx context.Context, res *result, before dbStats, elapsed time.Duration) error {
	after, err := e.dbStats(ctx)
	if err != nil {
		return err
	}
	secs := elapsed.Seconds()
	xact, rows := float64(after.xact-before.xact), float64(after.rows-before.rows)
	res.xactPerSec, res.rowsPerSec = xact/secs, rows/secs
	res.xactPerRound, res.rowsPerRound = xact/float64(e.c.rounds), rows/float64(e.c.rounds)
	return nil
}

// rss is the process's resident set size in bytes.
func rss(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

func pct(d []time.Duration, p int) string {
	if len(d) == 0 {
		return "-"
	}
	return quantile(d, p).Round(100 * time.Microsecond).String()
}

func quantile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := min(len(s)-1, (len(s)*p+99)/100-1)
	return s[max(i, 0)]
}

func waitHealthy(ctx context.Context, conn *grpc.ClientConn) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("server never became healthy")
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
