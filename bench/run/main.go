// Command run measures `oncejob run submit` on a run of N light items (one
// short chunk, one LLM call each) against `oncejob llm-sim` at zero
// latency, to show the run is bounded by the engine, not by the CLI:
//
//   - cli: the CLI submits the N items (batches of 1,000) to a server that
//     runs no workers: the CLI's own cost, wall and CPU;
//   - engine: the N items are already queued; the clock runs from the start
//     of a server with workers to the last item SUCCEEDED: the engine alone;
//   - run: the CLI submits the N items to a server with workers and waits
//     (--wait) for the run to be complete: what a user sees.
//
// Each phase runs on a fresh database. The CLI's share of the run's wall
// time is its CPU time (user + system) over the run's wall time; the run
// is bounded by the engine when its wall time is close to the engine's.
//
//	cd bench && go run ./run              # N = 10,000
//	cd bench && go run ./run -items 2000 -workers 8
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncejob/oncejob/bench/internal/benchkit"
)

const pipelinesYAML = `
pipelines:
  - name: light
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object}
`

type config struct {
	items   int
	workers int
	pgURL   string
	db      string
}

func main() {
	var c config
	flag.IntVar(&c.items, "items", 10000, "items in the run")
	flag.IntVar(&c.workers, "workers", 16, "the server's --workers")
	flag.StringVar(&c.pgURL, "pg", benchkit.EnvOr("BENCH_PG", "postgres://postgres@127.0.0.1:5432"), "Postgres server URL (no database)")
	flag.StringVar(&c.db, "db", "oncejob_bench_run", "database to create (dropped and created per phase)")
	flag.Parse()
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "bench run:", err)
		os.Exit(1)
	}
}

type bench struct {
	c      config
	bin    string
	tmp    string
	items  string
	pipes  string
	simURL string
	admin  *pgx.Conn
}

func run(ctx context.Context, c config) error {
	_, err := benchkit.FindRoot() // and work from the module root
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "oncejob-bench-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	b := &bench{c: c, tmp: tmp, bin: filepath.Join(tmp, "oncejob"), items: filepath.Join(tmp, "items.jsonl"), pipes: filepath.Join(tmp, "pipelines.yaml")}
	benchkit.Logf("building oncejob")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", b.bin, "./cmd/oncejob").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	if err := os.WriteFile(b.pipes, []byte(pipelinesYAML), 0o600); err != nil {
		return err
	}
	if err := benchkit.WriteItems(b.items, c.items); err != nil {
		return err
	}
	if b.admin, err = pgx.Connect(ctx, c.pgURL+"/postgres?sslmode=disable"); err != nil {
		return err
	}
	defer b.admin.Close(context.Background())
	defer b.admin.Exec(context.Background(), fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, c.db)) //nolint:errcheck // best effort

	simAddr := benchkit.FreeAddr()
	sim := exec.Command(b.bin, "llm-sim", "--addr", simAddr)
	if err := sim.Start(); err != nil {
		return err
	}
	defer func() { _ = sim.Process.Kill(); _ = sim.Wait() }()
	b.simURL = "http://" + simAddr
	if err := benchkit.WaitListen(simAddr); err != nil {
		return err
	}

	cliOnly, err := b.phaseCLI(ctx)
	if err != nil {
		return fmt.Errorf("cli: %w", err)
	}
	engine, err := b.phaseEngine(ctx)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	full, err := b.phaseRun(ctx)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	n := float64(c.items)
	fmt.Printf("run of %d light items, llm-sim at zero latency, serve --workers %d, Postgres; %d CPUs, load %s\n",
		c.items, c.workers, benchkit.NumCPU(), benchkit.LoadAvg())
	fmt.Printf("  cli    (submit only, no workers)  wall %7.2fs  %7.0f items/s  CLI CPU %6.2fs\n", cliOnly.wall.Seconds(), n/cliOnly.wall.Seconds(), cliOnly.cliCPU.Seconds())
	fmt.Printf("  engine (queued items to SUCCEEDED) wall %7.2fs  %7.0f items/s\n", engine.wall.Seconds(), n/engine.wall.Seconds())
	fmt.Printf("  run    (CLI submit --wait)        wall %7.2fs  %7.0f items/s  CLI CPU %6.2fs\n", full.wall.Seconds(), n/full.wall.Seconds(), full.cliCPU.Seconds())
	fmt.Printf("  the CLI's share of the run's wall time (its CPU / wall): %.1f%%\n", 100*full.cliCPU.Seconds()/full.wall.Seconds())
	fmt.Printf("  run wall / engine wall: %.2f (1.00: bounded by the engine)\n", full.wall.Seconds()/engine.wall.Seconds())
	return nil
}

type measured struct {
	wall   time.Duration
	cliCPU time.Duration
}

func (b *bench) fresh(ctx context.Context) (string, error) {
	if _, err := b.admin.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, b.c.db)); err != nil {
		return "", err
	}
	if _, err := b.admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %q`, b.c.db)); err != nil {
		return "", err
	}
	if _, err := b.http("/oncejob/reset"); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s/%s?sslmode=disable", b.c.pgURL, b.c.db), nil
}

// serve starts a server with workers on dbURL and returns its address and
// a stop function.
func (b *bench) serve(dbURL string, workers int) (string, func(), error) {
	addr := benchkit.FreeAddr()
	cmd := exec.Command(b.bin, "serve", "--database-url", dbURL, "--migrate", "--grpc-addr", addr, "--pipelines", b.pipes,
		"--llm-base-url", b.simURL+"/v1", "--workers", fmt.Sprint(workers), "--relays", "0", "--scheduler=false", "--log-level", "warn")
	logPath := filepath.Join(b.tmp, "serve.log")
	lf, err := os.Create(logPath)
	if err != nil {
		return "", nil, err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait(); lf.Close() }
	if err := benchkit.WaitListen(addr); err != nil {
		stop()
		return "", nil, err
	}
	return addr, stop, nil
}

// cli runs `oncejob run submit` and returns its wall and CPU time.
func (b *bench) cli(ctx context.Context, addr, name string, wait bool) (measured, error) {
	args := []string{"run", "submit", b.items, "--run", name, "--pipeline", "light", "--json", "--addr", addr}
	if wait {
		args = append(args, "--wait")
	}
	cmd := exec.CommandContext(ctx, b.bin, args...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	if err != nil {
		return measured{}, fmt.Errorf("%v\n%s", err, benchkit.Tail(out))
	}
	return measured{wall: wall, cliCPU: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}, nil
}

func (b *bench) phaseCLI(ctx context.Context) (measured, error) {
	db, err := b.fresh(ctx)
	if err != nil {
		return measured{}, err
	}
	addr, stop, err := b.serve(db, 0)
	if err != nil {
		return measured{}, err
	}
	defer stop()
	benchkit.Logf("cli phase")
	return b.cli(ctx, addr, "cli", false)
}

func (b *bench) phaseEngine(ctx context.Context) (measured, error) {
	db, err := b.fresh(ctx)
	if err != nil {
		return measured{}, err
	}
	addr, stop, err := b.serve(db, 0)
	if err != nil {
		return measured{}, err
	}
	if _, err := b.cli(ctx, addr, "engine", false); err != nil {
		stop()
		return measured{}, err
	}
	stop()
	benchkit.Logf("engine phase")
	start := time.Now()
	_, stop, err = b.serve(db, b.c.workers)
	if err != nil {
		return measured{}, err
	}
	defer stop()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return measured{}, err
	}
	defer conn.Close(context.Background())
	for {
		var done int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'succeeded'`).Scan(&done); err != nil {
			return measured{}, err
		}
		if done == b.c.items {
			return measured{wall: time.Since(start)}, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *bench) phaseRun(ctx context.Context) (measured, error) {
	db, err := b.fresh(ctx)
	if err != nil {
		return measured{}, err
	}
	addr, stop, err := b.serve(db, b.c.workers)
	if err != nil {
		return measured{}, err
	}
	defer stop()
	benchkit.Logf("run phase")
	m, err := b.cli(ctx, addr, "run", true)
	if err != nil {
		return m, err
	}
	var billed struct {
		Billed int `json:"billed_calls"`
	}
	body, err := b.http("/oncejob/stats")
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(body, &billed); err != nil {
		return m, err
	}
	if billed.Billed != b.c.items {
		return m, fmt.Errorf("the simulator billed %d calls for %d items", billed.Billed, b.c.items)
	}
	return m, nil
}

func (b *bench) http(path string) ([]byte, error) {
	method := "GET"
	if strings.HasSuffix(path, "/reset") {
		method = "POST"
	}
	out, err := exec.Command("curl", "-sf", "-X", method, b.simURL+path).Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return out, nil
}
