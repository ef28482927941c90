// Command console measures the web console in headless Chromium (Debian's
// chromium, through chromedp): its first paint with a large store, and
// whether its live job list keeps up with a steady stream of transitions.
//
// In one run it:
//
//  1. builds and starts the real `oncejob serve --workers 0` on a throwaway
//     Postgres database, with its HTTP face;
//
//  2. first paint, empty store (the peer): -loads fresh loads of /#/jobs in
//     a fresh tab each, timing from navigation start to the list rendered
//     (the console's performance mark) and to the next paint after it;
//
//  3. submits -jobs jobs (gRPC SubmitJob, 16 at a time) and publishes all
//     but the newest -hot of them through the store, as a store of mostly
//     finished jobs looks; then first paint again, with them;
//
//  4. live list: with /#/jobs open, drives -rate transitions per second for
//     -duration through the store, alternately claiming one of the -hot
//     jobs (RUNNING) and moving the one claimed before to RETRY_WAIT, each
//     recording when its commit returned; the page reports each change it
//     applied (the console's oncejob:changes-applied event) with the time,
//     and the run checks that every transition arrived and how late.
//
//     cd bench/console && go run .                  # 10,000 jobs, 100 transitions/s for 20s
//     cd bench/console && go run . -jobs 2000 -duration 5s
//
// Targets: first paint with the jobs under 1 s; the live list applies every
// transition, its lag not growing over the run. A separate module (replace
// => ../..) like bench/watch.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/web/chromium"
)

type config struct {
	pg       string
	jobs     int
	hot      int
	loads    int
	rate     int
	duration time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.pg, "pg", envOr("BENCH_PG", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "admin Postgres URL (env BENCH_PG); a database is created and dropped")
	flag.IntVar(&c.jobs, "jobs", 10000, "jobs in the store for the second first-paint measure and the live phase")
	flag.IntVar(&c.hot, "hot", 100, "newest jobs left queued, the ones the live phase moves (on the list's first page)")
	flag.IntVar(&c.loads, "loads", 5, "page loads per first-paint measure")
	flag.IntVar(&c.rate, "rate", 100, "transitions per second in the live phase")
	flag.DurationVar(&c.duration, "duration", 20*time.Second, "length of the live phase")
	flag.Parse()
	ctx, stop := signalContext()
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench/console:", err)
		os.Exit(1)
	}
}

type env struct {
	c        config
	admin    *pgx.Conn
	dbName   string
	server   *exec.Cmd
	httpBase string
	conn     *grpc.ClientConn
	st       *storepg.Store
	browser  string // chromium's path
}

func run(ctx context.Context, c config) error {
	browser, err := chromium.Path()
	if err != nil {
		return err
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "oncejob-bench-console-")
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
	e, err := newEnv(ctx, c, bin, tmp)
	if err != nil {
		return err
	}
	defer e.close()
	e.browser = browser

	empty, err := e.firstPaint(ctx, tmp)
	if err != nil {
		return fmt.Errorf("first paint, empty store: %w", err)
	}
	fmt.Printf("seeding %d jobs (%d left queued)...\n", c.jobs, c.hot)
	hot, err := e.seed(ctx)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	full, err := e.firstPaint(ctx, tmp)
	if err != nil {
		return fmt.Errorf("first paint, %d jobs: %w", c.jobs, err)
	}
	live, err := e.livePhase(ctx, tmp, hot)
	if err != nil {
		return fmt.Errorf("live list: %w", err)
	}

	fmt.Println()
	fmt.Printf("%-28s %10s %10s %10s %10s\n", "first paint (ms)", "rendered", "painted", "max paint", "FCP")
	for _, r := range []struct {
		name string
		p    paints
	}{{"empty store", empty}, {fmt.Sprintf("%d jobs", c.jobs), full}} {
		fmt.Printf("%-28s %10.0f %10.0f %10.0f %10.0f\n", r.name, median(r.p.rendered), median(r.p.painted), slices.Max(r.p.painted), median(r.p.fcp))
	}
	ratio := median(full.painted) / median(empty.painted)
	fmt.Printf("\nfirst paint with %d jobs: median %.0f ms, max %.0f ms, %.2fx the empty store (target < 1000 ms: %s)\n",
		c.jobs, median(full.painted), slices.Max(full.painted), ratio, verdict(slices.Max(full.painted) < 1000))
	fmt.Printf("live list at %d transitions/s for %s: %d of %d applied; lag p50 %s, p99 %s, max %s; p99 first half %s, second half %s (keeps up: %s)\n",
		c.rate, c.duration, live.applied, live.sent, pct(live.lags, 50), pct(live.lags, 99), pct(live.lags, 100),
		pct(live.firstHalf, 99), pct(live.secondHalf, 99),
		verdict(live.applied == live.sent && quantile(live.secondHalf, 99) < time.Second))
	return nil
}

func newEnv(ctx context.Context, c config, bin, tmp string) (*env, error) {
	e := &env{c: c, dbName: fmt.Sprintf("oncejob_bench_console_%d", os.Getpid())}
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
	grpcAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	e.httpBase = "http://" + httpAddr
	e.server = exec.Command(bin, "serve", "--database-url", u.String(), "--migrate", "--workers", "0",
		"--grpc-addr", grpcAddr, "--http-addr", httpAddr, "--log-level", "warn")
	logFile, err := os.Create(filepath.Join(tmp, "serve.log"))
	if err != nil {
		return nil, err
	}
	e.server.Stdout, e.server.Stderr = logFile, logFile
	if err := e.server.Start(); err != nil {
		return nil, err
	}
	fmt.Printf("server pid %d, console %s/\n", e.server.Process.Pid, e.httpBase)
	if e.conn, err = grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return nil, err
	}
	if err := waitHealthy(ctx, e.conn); err != nil {
		return nil, err
	}
	if e.st, err = storepg.Open(ctx, u.String()); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *env) close() {
	if e.conn != nil {
		_ = e.conn.Close()
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

// seed submits the jobs and publishes all but the newest e.c.hot; it
// returns the ids of those.
func (e *env) seed(ctx context.Context) ([]string, error) {
	ids := make([]string, e.c.jobs)
	cold := e.c.jobs - e.c.hot
	// The hot jobs are submitted after the others finished, so they are
	// the newest: the list's first page.
	if err := e.submit(ctx, ids, 0, cold); err != nil {
		return nil, err
	}
	if err := e.submit(ctx, ids, cold, e.c.jobs); err != nil {
		return nil, err
	}
	// The state factory's seam finishes a queued job without a worker.
	now := time.Now()
	for _, id := range ids[:cold] {
		if _, err := e.st.JobUpdateFull(ctx, &store.JobUpdateFullParams{
			Tenant: "default", ID: id, Status: store.JobStatusSucceeded, Stage: store.JobStagePublished,
			Output: []byte(`{"summary":"done"}`), FinishedAt: &now, Message: "published",
		}); err != nil {
			return nil, err
		}
	}
	return ids[cold:], nil
}

// submit submits jobs from to to, 16 at a time, filling ids.
func (e *env) submit(ctx context.Context, ids []string, from, to int) error {
	client := oncejobv1.NewJobServiceClient(e.conn)
	next := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range next {
				resp, err := client.SubmitJob(metadata.AppendToOutgoingContext(ctx, "idempotency-key", fmt.Sprintf("seed-%d", i)),
					&oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{
						Content: &oncejobv1.Document_Text{Text: fmt.Sprintf("console bench document %d", i)},
						Name:    fmt.Sprintf("document-%05d.txt", i),
					}})
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				ids[i] = resp.GetJob().GetId()
			}
		})
	}
	for i := from; i < to; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// paints are the timings of page loads, in ms from navigation start.
type paints struct{ rendered, painted, fcp []float64 }

// observeScript runs in every page before its own scripts: it notes the
// next paint after the console's list is rendered, and each change the
// live list applies.
const observeScript = `
window.benchApplied = [];
document.addEventListener('oncejob:changes-applied', (e) => {
  const t = Date.now();
  for (const ev of e.detail) window.benchApplied.push([ev.job_id, ev.status, ev.attempt || 0, t]);
});
new PerformanceObserver((list) => {
  for (const m of list.getEntries()) {
    if (m.name !== 'oncejob:jobs-rendered') continue;
    window.benchRendered = m.startTime;
    requestAnimationFrame(() => setTimeout(() => { window.benchPainted = performance.now(); }, 0));
  }
}).observe({ entryTypes: ['mark'] });`

// newTab opens a fresh browser (new profile: no cache) with the observer.
func (e *env) newTab(ctx context.Context, tmp string) (context.Context, context.CancelFunc, error) {
	dir, err := os.MkdirTemp(tmp, "profile-")
	if err != nil {
		return nil, nil, err
	}
	tab, cancel := chromium.New(ctx, e.browser, dir)
	if err := chromedp.Do(tab); err != nil {
		cancel()
		return nil, nil, err
	}
	if _, err := chromedp.Call(tab, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: observeScript}); err != nil {
		cancel()
		return nil, nil, err
	}
	return tab, cancel, nil
}

func (e *env) firstPaint(ctx context.Context, tmp string) (paints, error) {
	var p paints
	for range e.c.loads {
		tab, cancel, err := e.newTab(ctx, tmp)
		if err != nil {
			return p, err
		}
		tctx, tcancel := context.WithTimeout(tab, 30*time.Second)
		err = chromedp.Do(tctx, chromedp.Navigate(e.httpBase+"/#/jobs"),
			chromedp.Poll[chromedp.Void](`window.benchPainted !== undefined`))
		var t struct{ Rendered, Painted, FCP float64 }
		if err == nil {
			t, err = chromedp.Run(tctx, chromedp.Evaluate[struct{ Rendered, Painted, FCP float64 }](
				`({Rendered: window.benchRendered, Painted: window.benchPainted,
				   FCP: (performance.getEntriesByName('first-contentful-paint')[0] || {startTime: 0}).startTime})`))
		}
		tcancel()
		cancel()
		if err != nil {
			return p, err
		}
		p.rendered, p.painted, p.fcp = append(p.rendered, t.Rendered), append(p.painted, t.Painted), append(p.fcp, t.FCP)
	}
	return p, nil
}

type liveResult struct {
	sent, applied         int
	lags                  []time.Duration
	firstHalf, secondHalf []time.Duration
}

type transitionKey struct {
	job     string
	status  string
	attempt int32
}

func (e *env) livePhase(ctx context.Context, tmp string, hot []string) (liveResult, error) {
	var res liveResult
	tab, cancel, err := e.newTab(ctx, tmp)
	if err != nil {
		return res, err
	}
	defer cancel()
	tctx, tcancel := context.WithTimeout(tab, e.c.duration+2*time.Minute)
	defer tcancel()
	if err := chromedp.Do(tctx, chromedp.Navigate(e.httpBase+"/#/jobs"),
		chromedp.Poll[chromedp.Void](`window.benchPainted !== undefined && document.getElementById('live').textContent === 'live'`)); err != nil {
		return res, err
	}

	commits := map[transitionKey]time.Time{}
	var running *store.Job
	// The i-th transition is due at start + i/rate; one that is late (a slow
	// commit) is made at once, so the rate holds over the run.
	interval := time.Second / time.Duration(e.c.rate)
	start := time.Now()
	for i := 0; time.Since(start) < e.c.duration; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		if running == nil {
			jobs, err := e.st.JobClaim(ctx, &store.JobClaimParams{Owner: "bench", Limit: 1, LeaseDuration: time.Hour})
			if err != nil {
				return res, err
			}
			if len(jobs) != 1 {
				return res, errors.New("no hot job to claim")
			}
			running = jobs[0]
			commits[transitionKey{running.ID, "JOB_STATUS_RUNNING", running.Attempt}] = time.Now()
		} else {
			past := time.Now().Add(-time.Millisecond)
			j, err := e.st.JobTransition(ctx, &store.JobTransitionParams{
				Lease: store.Lease{JobID: running.ID, Owner: running.LeaseOwner, Attempt: running.Attempt},
				To:    store.JobStatusRetryWait, RunAfter: &past, Message: "bench",
			})
			if err != nil {
				return res, err
			}
			commits[transitionKey{j.ID, "JOB_STATUS_RETRY_WAIT", j.Attempt}] = time.Now()
			running = nil
		}
	}
	res.sent = len(commits)
	achieved := float64(res.sent) / time.Since(start).Seconds()
	fmt.Printf("live phase: %d transitions in %s (%.0f/s)\n", res.sent, time.Since(start).Round(time.Millisecond), achieved)

	// Wait for the page to have everything (or give up after 30s).
	deadline := time.Now().Add(30 * time.Second)
	var applied [][]any
	for {
		raw, err := chromedp.Run(tctx, chromedp.Evaluate[[]byte](`window.benchApplied`))
		if err != nil {
			return res, err
		}
		if err := json.Unmarshal(raw, &applied); err != nil {
			return res, err
		}
		if countKnown(applied, commits) >= res.sent || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.applied, res.lags, res.firstHalf, res.secondHalf = lagsOf(applied, commits)
	return res, nil
}

// lagsOf matches the page's applied transitions to their commits: how many
// distinct committed transitions were applied, and the lag of each in commit
// order, also split into the run's first and second halves.
func lagsOf(applied [][]any, commits map[transitionKey]time.Time) (n int, all, firstHalf, secondHalf []time.Duration) {
	seen := map[transitionKey]bool{}
	type lag struct {
		at time.Time
		d  time.Duration
	}
	var lags []lag
	for _, a := range applied {
		k := transitionKey{a[0].(string), a[1].(string), int32(a[2].(float64))}
		at, ok := commits[k]
		if !ok || seen[k] {
			continue
		}
		seen[k] = true
		lags = append(lags, lag{at, time.UnixMilli(int64(a[3].(float64))).Sub(at)})
	}
	n = len(seen)
	sort.Slice(lags, func(i, j int) bool { return lags[i].at.Before(lags[j].at) })
	for i, l := range lags {
		all = append(all, l.d)
		if i < len(lags)/2 {
			firstHalf = append(firstHalf, l.d)
		} else {
			secondHalf = append(secondHalf, l.d)
		}
	}
	return n, all, firstHalf, secondHalf
}

func countKnown(applied [][]any, commits map[transitionKey]time.Time) int {
	seen := map[transitionKey]bool{}
	for _, a := range applied {
		k := transitionKey{a[0].(string), a[1].(string), int32(a[2].(float64))}
		if _, ok := commits[k]; ok {
			seen[k] = true
		}
	}
	return len(seen)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
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

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
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
