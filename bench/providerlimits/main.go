// Command providerlimits measures how close the real `oncejob serve` on Postgres
// runs to a provider's limits, and never past them, against `oncejob
// llm-sim` enforcing the limits as an external process (429 with
// Retry-After and x-ratelimit-* headers). docs/architecture.md, "Provider
// limits"; figures in docs/performance.md.
//
// Phases (-phases, default all), each on a fresh database and simulator:
//
//   - requests, tokens, inflight: -jobs one-call jobs queued, then a serve
//     with workers; wall time from its start to the last job SUCCEEDED
//     against what the limit allows (the provider's bucket starts full:
//     (calls - capacity) / rate; in flight: ceil(calls / limit) x latency).
//     The limit is configured in the pipelines file as the provider's.
//
//   - nolimit: the provider enforces 20 requests a second and nothing is
//     configured: after the first window, calls/s / limit and the share of
//     429s, from the simulator's counters sampled every 100 ms.
//
//   - fair: tenant a's run of -fair-items items while tenant b submits one
//     job a second: b's time from submission to its call's start (its
//     journaled call's time less its latency) and to SUCCEEDED, p50/p99.
//
//   - headline: -headline-jobs jobs, the provider at 30,000 requests a
//     minute (500 a second) with 2 s latency: calls/s / limit after the
//     first window and the share of 429s, with serve's CPU.
//
//     cd bench && go run ./providerlimits                      # every phase, ~5 minutes
//     cd bench && go run ./providerlimits -phases headline -headline-jobs 30000
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncejob/oncejob/bench/internal/benchkit"
)

type config struct {
	jobs, fairItems, headlineJobs, headlineWorkers int
	pgURL, db, phases                              string
	verbose                                        bool
}

func main() {
	var c config
	flag.IntVar(&c.jobs, "jobs", 600, "jobs of the requests, tokens, inflight and nolimit phases")
	flag.IntVar(&c.fairItems, "fair-items", 2000, "items of tenant a's run in the fair phase")
	flag.IntVar(&c.headlineJobs, "headline-jobs", 15000, "jobs of the headline phase (30 s of its limit)")
	flag.IntVar(&c.headlineWorkers, "headline-workers", 6000, "serve --workers of the headline phase (1,000 in flight + 10 s of calls)")
	flag.StringVar(&c.pgURL, "pg", benchkit.EnvOr("BENCH_PG", "postgres://postgres@127.0.0.1:5432"), "Postgres server URL (no database)")
	flag.StringVar(&c.db, "db", "oncejob_bench_providerlimits", "database to create (dropped and created per phase)")
	flag.StringVar(&c.phases, "phases", "requests,tokens,inflight,nolimit,fair,headline", "phases to run, in this order")
	flag.BoolVar(&c.verbose, "v", false, "print the calls started in each second of the requests, tokens, inflight and headline phases")
	flag.Parse()
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "bench providerlimits:", err)
		os.Exit(1)
	}
}

type bench struct {
	c     config
	bin   string
	tmp   string
	admin *pgx.Conn
	rows  []string
}

func run(ctx context.Context, c config) error {
	if _, err := benchkit.FindRoot(); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "oncejob-bench-providerlimits-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	b := &bench{c: c, tmp: tmp, bin: filepath.Join(tmp, "oncejob")}
	benchkit.Logf("building oncejob")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", b.bin, "./cmd/oncejob").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	if b.admin, err = pgx.Connect(ctx, c.pgURL+"/postgres?sslmode=disable"); err != nil {
		return err
	}
	defer b.admin.Close(context.Background())
	defer b.admin.Exec(context.Background(), fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, c.db)) //nolint:errcheck // best effort

	fmt.Printf("provider limits: oncejob serve on Postgres against llm-sim; %d CPUs, load %s at the start\n", benchkit.NumCPU(), benchkit.LoadAvg())
	for _, phase := range strings.Split(c.phases, ",") {
		var err error
		switch phase {
		case "requests":
			err = b.paced(ctx, phase, []string{"--limit-requests", "20", "--limit-window", "1s", "--latency", "20ms"}, "{requests_per_minute: 1200}")
		case "tokens":
			err = b.paced(ctx, phase, []string{"--limit-tokens", "1000", "--limit-window", "1s", "--latency", "20ms"}, "{tokens_per_minute: 60000}")
		case "inflight":
			err = b.paced(ctx, phase, []string{"--limit-in-flight", "20", "--latency", "1s"}, "{calls_in_flight: 20}")
		case "nolimit":
			err = b.noLimit(ctx)
		case "fair":
			err = b.fair(ctx)
		case "headline":
			err = b.headline(ctx)
		default:
			err = fmt.Errorf("unknown phase %q", phase)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", phase, err)
		}
	}
	return nil
}

// say prints a result line with the machine's load beside it.
func say(format string, args ...any) {
	fmt.Printf("  "+format+"  [load %s]\n", append(args, benchkit.LoadAvg())...)
}

const pipelineYAML = `
pipelines:
  - name: light
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object}
`

func (b *bench) pipelines(limits string) (string, error) {
	text := "model_profiles:\n  default:\n    model: oncejob-sim-1\n"
	if limits != "" {
		text += "    limits: " + limits + "\n"
	}
	path := filepath.Join(b.tmp, "pipelines.yaml")
	return path, os.WriteFile(path, []byte(text+pipelineYAML), 0o600)
}

func (b *bench) fresh(ctx context.Context) (string, error) {
	if _, err := b.admin.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, b.c.db)); err != nil {
		return "", err
	}
	if _, err := b.admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %q`, b.c.db)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s/%s?sslmode=disable", b.c.pgURL, b.c.db), nil
}

// sim is `oncejob llm-sim` in a process of its own.
type sim struct {
	cmd *exec.Cmd
	url string
}

func (b *bench) startSim(args ...string) (*sim, error) {
	addr := benchkit.FreeAddr()
	cmd := exec.Command(b.bin, append([]string{"llm-sim", "--addr", addr}, args...)...)
	lf, err := os.Create(filepath.Join(b.tmp, "llm-sim.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &sim{cmd: cmd, url: "http://" + addr}
	return s, benchkit.WaitListen(addr)
}

func (s *sim) stop() { _ = s.cmd.Process.Kill(); _ = s.cmd.Wait() }

type simStats struct {
	Requests         int64            `json:"requests"`
	Billed           int64            `json:"billed_calls"`
	PromptTokens     int64            `json:"billed_prompt_tokens"`
	CompletionTokens int64            `json:"billed_completion_tokens"`
	RateLimited      int64            `json:"rate_limited"`
	RateLimitedBy    map[string]int64 `json:"rate_limited_by"`
	MaxInFlight      int              `json:"max_in_flight"`
	InFlight         int              `json:"in_flight"`
	at               time.Time
}

func (s *sim) stats() (simStats, error) {
	var st simStats
	resp, err := http.Get(s.url + "/oncejob/stats")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	st.at = time.Now()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// server is `oncejob serve`.
type server struct {
	cmd      *exec.Cmd
	addr     string // HTTP
	log      *os.File
	started  time.Time
	cpu      time.Duration
	finished bool
}

func (b *bench) serve(dbURL, pipes string, s *sim, workers int, extra ...string) (*server, error) {
	grpcAddr, httpAddr := benchkit.FreeAddr(), benchkit.FreeAddr()
	args := append([]string{"serve", "--database-url", dbURL, "--migrate", "--grpc-addr", grpcAddr, "--http-addr", httpAddr,
		"--pipelines", pipes, "--llm-base-url", s.url + "/v1", "--workers", fmt.Sprint(workers), "--relays", "0", "--scheduler=false",
		"--poll-interval", "20ms", "--log-level", "warn"}, extra...)
	lf, err := os.OpenFile(filepath.Join(b.tmp, "serve.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(b.bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	srv := &server{cmd: cmd, addr: "http://" + httpAddr, log: lf, started: time.Now()}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if err := benchkit.WaitListen(httpAddr); err != nil {
		srv.stop()
		return nil, err
	}
	return srv, nil
}

func (s *server) stop() {
	if s.finished {
		return
	}
	s.finished = true
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Wait()
	s.cpu = s.cmd.ProcessState.UserTime() + s.cmd.ProcessState.SystemTime()
	s.log.Close()
}

// post sends one JSON call of the HTTP API and decodes its answer into out.
func post(url, bearer, idemKey string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, benchkit.Tail(got))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(got, out)
}

// submit queues n one-call jobs (keys prefix-i), in calls of 1,000 items,
// into run when it is not empty.
func submit(srv *server, bearer, prefix, run string, n int) error {
	for from := 0; from < n; from += 1000 {
		var items []map[string]any
		for i := from; i < min(n, from+1000); i++ {
			items = append(items, map[string]any{
				"idempotency_key": fmt.Sprintf("%s-%d", prefix, i),
				"request": map[string]any{"pipeline": "light", "document": map[string]any{
					"text": fmt.Sprintf("item %d of %s, a short document for one call", i, prefix)}},
			})
		}
		var resp struct {
			Results []struct {
				Error map[string]any `json:"error"`
			} `json:"results"`
		}
		if err := post(srv.addr+"/v1/jobs:batchSubmit", bearer, "", map[string]any{"run_id": run, "items": items}, &resp); err != nil {
			return err
		}
		for _, r := range resp.Results {
			if r.Error != nil {
				return fmt.Errorf("an item was refused: %v", r.Error)
			}
		}
	}
	return nil
}

// queue creates a fresh database with n jobs queued, through a serve
// with no workers.
func (b *bench) queue(ctx context.Context, pipes string, s *sim, n int) (string, error) {
	db, err := b.fresh(ctx)
	if err != nil {
		return "", err
	}
	srv, err := b.serve(db, pipes, s, 0)
	if err != nil {
		return "", err
	}
	defer srv.stop()
	return db, submit(srv, "", "job", "", n)
}

// samples polls the simulator every interval until done() says so, and
// returns the samples and when done said so.
func sampleUntil(s *sim, interval time.Duration, done func(simStats) (bool, error)) ([]simStats, error) {
	var out []simStats
	deadline := time.Now().Add(30 * time.Minute)
	for time.Now().Before(deadline) {
		st, err := s.stats()
		if err != nil {
			return out, err
		}
		out = append(out, st)
		ok, err := done(st)
		if err != nil || ok {
			return out, err
		}
		time.Sleep(interval)
	}
	return out, fmt.Errorf("not done in 30 minutes")
}

func succeeded(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var n int64
	err := conn.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'succeeded'`).Scan(&n)
	return n, err
}

// paced: the jobs queued, then a serve with workers; wall time to the
// last SUCCEEDED against what the limit allows.
func (b *bench) paced(ctx context.Context, phase string, simArgs []string, limits string) error {
	benchkit.Logf("phase %s", phase)
	s, err := b.startSim(simArgs...)
	if err != nil {
		return err
	}
	defer s.stop()
	pipes, err := b.pipelines(limits)
	if err != nil {
		return err
	}
	n := b.c.jobs
	db, err := b.queue(ctx, pipes, s, n)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	srv, err := b.serve(db, pipes, s, 2000)
	if err != nil {
		return err
	}
	defer srv.stop()
	samples, err := sampleUntil(s, 50*time.Millisecond, func(simStats) (bool, error) {
		done, err := succeeded(ctx, conn)
		return done == int64(n), err
	})
	if err != nil {
		return err
	}
	// From the first call's start (its journal row less its latency): what
	// serve's start and first claim take is not the pacer's.
	var first, last time.Time
	if err := conn.QueryRow(ctx, `SELECT min(created_at - make_interval(secs => latency_ms / 1000.0)), (SELECT max(finished_at) FROM jobs) FROM llm_attempts`).Scan(&first, &last); err != nil {
		return err
	}
	wall, fromStart := last.Sub(first), last.Sub(srv.started)
	st := samples[len(samples)-1]
	if st.Billed != int64(n) {
		return fmt.Errorf("the simulator billed %d calls for %d jobs", st.Billed, n)
	}
	var allowed time.Duration
	var what string
	switch phase {
	case "requests":
		allowed = time.Duration(float64(n-20) / 20 * float64(time.Second))
		what = "20 requests/s (1,200/min), bucket of 20"
	case "tokens":
		tokens := st.PromptTokens + st.CompletionTokens
		allowed = time.Duration(float64(tokens-1000) / 1000 * float64(time.Second))
		what = fmt.Sprintf("1,000 tokens/s (60,000/min), bucket of 1,000; %.0f tokens a call", float64(tokens)/float64(n))
	case "inflight":
		allowed = time.Duration(math.Ceil(float64(n)/20)) * time.Second
		what = "20 calls in flight of 1 s"
	}
	if b.c.verbose {
		if err := printPerSecond(ctx, conn); err != nil {
			return err
		}
	}
	say("%-9s %s: %d jobs in %6.2fs from the first call (%6.2fs from serve's start), the limit allows %6.2fs: %.3fx (target <= 1.1); 429s %d of %d requests (%.2f%%), most in flight %d",
		phase, what, n, wall.Seconds(), fromStart.Seconds(), allowed.Seconds(), wall.Seconds()/allowed.Seconds(), st.RateLimited, st.Requests,
		100*float64(st.RateLimited)/float64(st.Requests), st.MaxInFlight)
	return nil
}

// printPerSecond prints the calls started in each second from the first
// call and the jobs sent back to wait (-v).
func printPerSecond(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `
		WITH a AS (SELECT created_at - make_interval(secs => latency_ms / 1000.0) AS at FROM llm_attempts)
		SELECT floor(extract(epoch FROM at - (SELECT min(at) FROM a)))::int AS s, count(*) FROM a GROUP BY s ORDER BY s`)
	if err != nil {
		return err
	}
	var line []string
	for rows.Next() {
		var s, n int
		if err := rows.Scan(&s, &n); err != nil {
			return err
		}
		line = append(line, fmt.Sprintf("%d:%d", s, n))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var waits int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM job_events WHERE status = 'retry_wait'`).Scan(&waits); err != nil {
		return err
	}
	fmt.Printf("    calls started per second: %s; sent back to wait %d times\n", strings.Join(line, " "), waits)
	rows, err = conn.Query(ctx, `
		WITH a AS (SELECT job_id, created_at - make_interval(secs => latency_ms / 1000.0) AS at FROM llm_attempts),
		w AS (SELECT job_id, count(*) AS n, max(next_attempt_at) AS next, max(created_at) AS parked FROM job_events WHERE status = 'retry_wait' GROUP BY job_id),
		t0 AS (SELECT min(at) AS t FROM a)
		SELECT floor(extract(epoch FROM a.at - t0.t) / 5)::int * 5 AS s, w.n, count(*),
			round(avg(extract(epoch FROM w.parked - t0.t))::numeric, 1), round(avg(extract(epoch FROM w.next - t0.t))::numeric, 1),
			round(avg(extract(epoch FROM a.at - w.next))::numeric, 2)
		FROM a JOIN w USING (job_id), t0 GROUP BY 1, 2 ORDER BY 1, 2`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var s, n, count int
		var parked, next, late float64
		if err := rows.Scan(&s, &n, &count, &parked, &next, &late); err != nil {
			return err
		}
		fmt.Printf("      started in [%d s, +5): %d jobs sent back %d times, last at %.1f s for %.1f s, started %.2f s after\n", s, count, n, parked, next, late)
	}
	return rows.Err()
}

// steady is the calls/s and the share of 429s between the first sample a
// window after the first call and the first sample at 95% of n billed.
func steady(samples []simStats, window time.Duration, n int64) (rate, share float64, from, to simStats, err error) {
	i := slices.IndexFunc(samples, func(s simStats) bool { return s.Requests > 0 })
	if i < 0 {
		return 0, 0, from, to, fmt.Errorf("no call reached the simulator")
	}
	start := samples[i].at.Add(window)
	j := slices.IndexFunc(samples, func(s simStats) bool { return !s.at.Before(start) })
	k := slices.IndexFunc(samples, func(s simStats) bool { return s.Billed*100 >= n*95 })
	if j < 0 || k <= j {
		return 0, 0, from, to, fmt.Errorf("the run ended within its first window: more jobs")
	}
	from, to = samples[j], samples[k]
	secs := to.at.Sub(from.at).Seconds()
	rate = float64(to.Billed-from.Billed) / secs
	if req := to.Requests - from.Requests; req > 0 {
		share = float64(to.RateLimited-from.RateLimited) / float64(req)
	}
	return rate, share, from, to, nil
}

// noLimit: nothing configured, the provider enforces 20 requests a second.
func (b *bench) noLimit(ctx context.Context) error {
	benchkit.Logf("phase nolimit")
	s, err := b.startSim("--limit-requests", "20", "--limit-window", "1s", "--latency", "20ms")
	if err != nil {
		return err
	}
	defer s.stop()
	pipes, err := b.pipelines("")
	if err != nil {
		return err
	}
	n := b.c.jobs
	db, err := b.queue(ctx, pipes, s, n)
	if err != nil {
		return err
	}
	srv, err := b.serve(db, pipes, s, 2000)
	if err != nil {
		return err
	}
	defer srv.stop()
	samples, err := sampleUntil(s, 100*time.Millisecond, func(st simStats) (bool, error) { return st.Billed >= int64(n), nil })
	if err != nil {
		return err
	}
	rate, share, from, to, err := steady(samples, time.Second, int64(n))
	if err != nil {
		return err
	}
	all := samples[len(samples)-1]
	say("nolimit   none configured, the provider at 20 requests/s: after the first window %.2f calls/s = %.3fx the limit (target >= 0.9), 429s %.2f%% (%d of %d, target < 2%%); over the whole run %d 429s of %d requests",
		rate, rate/20, 100*share, to.RateLimited-from.RateLimited, to.Requests-from.Requests, all.RateLimited, all.Requests)
	return nil
}

// fair: tenant a's run while tenant b submits one job a second.
func (b *bench) fair(ctx context.Context) error {
	benchkit.Logf("phase fair")
	s, err := b.startSim("--limit-requests", "20", "--limit-window", "1s", "--latency", "20ms")
	if err != nil {
		return err
	}
	defer s.stop()
	pipes, err := b.pipelines("{requests_per_minute: 1200}")
	if err != nil {
		return err
	}
	keys := filepath.Join(b.tmp, "keys.yaml")
	keyA, keyB := "ojk_bench_tenant_a_secret_0001", "ojk_bench_tenant_b_secret_0002"
	if err := os.WriteFile(keys, []byte(fmt.Sprintf("keys:\n  - tenant: a\n    sha256: %s\n  - tenant: b\n    sha256: %s\n", hashKey(keyA), hashKey(keyB))), 0o600); err != nil {
		return err
	}
	db, err := b.fresh(ctx)
	if err != nil {
		return err
	}
	srv, err := b.serve(db, pipes, s, 4000, "--api-keys", keys)
	if err != nil {
		return err
	}
	defer srv.stop()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var created struct {
		Run struct {
			ID string `json:"id"`
		} `json:"run"`
	}
	if err := post(srv.addr+"/v1/runs", keyA, "bench-run", map[string]any{"name": "bulk", "pipeline": "light"}, &created); err != nil {
		return err
	}
	if err := submit(srv, keyA, "a", created.Run.ID, b.c.fairItems); err != nil {
		return err
	}
	if err := interactiveBeside(ctx, conn, srv, keyB); err != nil {
		return err
	}
	return b.reportFair(ctx, conn, s)
}

// interactiveBeside submits one job of tenant b a second while tenant a
// has jobs to go, then waits for every job to succeed.
func interactiveBeside(ctx context.Context, conn *pgx.Conn, srv *server, keyB string) error {
	for n := 0; ; n++ {
		var left int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE tenant = 'a' AND status <> 'succeeded'`).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			break
		}
		err := post(srv.addr+"/v1/jobs", keyB, fmt.Sprintf("b-%d", n), map[string]any{"pipeline": "light", "document": map[string]any{
			"text": fmt.Sprintf("tenant b's job %d, someone waits for it", n)}}, nil)
		if err != nil {
			return err
		}
		time.Sleep(time.Second)
	}
	for {
		var left int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status <> 'succeeded'`).Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reportFair prints tenant b's waits: to its call's start (its journaled
// call's time less its latency) and to SUCCEEDED.
func (b *bench) reportFair(ctx context.Context, conn *pgx.Conn, s *sim) error {
	rows, err := conn.Query(ctx, `
		SELECT extract(epoch FROM (a.created_at - make_interval(secs => a.latency_ms / 1000.0)) - j.created_at)::float8,
			extract(epoch FROM j.finished_at - j.created_at)::float8
		FROM jobs j
		JOIN LATERAL (SELECT created_at, latency_ms FROM llm_attempts WHERE job_id = j.id AND outcome = 'succeeded' ORDER BY id LIMIT 1) a ON true
		WHERE j.tenant = 'b'`)
	if err != nil {
		return err
	}
	var starts, ends []float64
	for rows.Next() {
		var st, end float64
		if err := rows.Scan(&st, &end); err != nil {
			return err
		}
		starts, ends = append(starts, st), append(ends, end)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var span float64
	if err := conn.QueryRow(ctx, `SELECT extract(epoch FROM max(finished_at) - min(created_at))::float8 FROM jobs WHERE tenant = 'a'`).Scan(&span); err != nil {
		return err
	}
	st, err := s.stats()
	if err != nil {
		return err
	}
	say("fair      tenant a's run of %d items (%.1f s, %.3fx of 20/s) while tenant b submitted %d jobs, one a second: b's call started after p50 %.2fs, p99 %.2fs, max %.2fs (target p99 <= 2s); b's SUCCEEDED after p50 %.2fs, p99 %.2fs; 429s %d",
		b.c.fairItems, span, float64(b.c.fairItems)/span/20, len(starts), pct(starts, 50), pct(starts, 99), pct(starts, 100), pct(ends, 50), pct(ends, 99), st.RateLimited)
	return nil
}

// headline: one serve at 30,000 requests a minute with 2 s latency.
func (b *bench) headline(ctx context.Context) error {
	benchkit.Logf("phase headline")
	s, err := b.startSim("--limit-requests", "500", "--limit-window", "1s", "--latency", "2s")
	if err != nil {
		return err
	}
	defer s.stop()
	pipes, err := b.pipelines("{requests_per_minute: 30000}")
	if err != nil {
		return err
	}
	n := b.c.headlineJobs
	db, err := b.queue(ctx, pipes, s, n)
	if err != nil {
		return err
	}
	srv, err := b.serve(db, pipes, s, b.c.headlineWorkers, "--lease-duration", "2m")
	if err != nil {
		return err
	}
	defer srv.stop()
	load := benchkit.LoadAvg()
	maxInFlight := 0
	samples, err := sampleUntil(s, 250*time.Millisecond, func(st simStats) (bool, error) {
		maxInFlight = max(maxInFlight, st.InFlight)
		return st.Billed >= int64(n), nil
	})
	if err != nil {
		return err
	}
	srv.stop()
	if b.c.verbose {
		conn, err := pgx.Connect(ctx, db)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		if err := printPerSecond(ctx, conn); err != nil {
			return err
		}
	}
	rate, share, from, to, err := steady(samples, 3*time.Second, int64(n))
	if err != nil {
		return err
	}
	say("headline  one serve, the provider at 500 requests/s (30,000/min), 2 s a call, %d jobs, --workers %d: after the first window %.1f calls/s = %.3fx the limit (target >= 0.95), 429s %.2f%% (%d of %d, target <= 0.5%%); most calls in flight %d; serve CPU %.1fs (%.2f ms a job); load %s at its start",
		n, b.c.headlineWorkers, rate, rate/500, 100*share, to.RateLimited-from.RateLimited, to.Requests-from.Requests, maxInFlight, srv.cpu.Seconds(), 1000*srv.cpu.Seconds()/float64(n), load)
	return nil
}

// hashKey is the sha256 of an API key, as the --api-keys file holds it.
func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}
