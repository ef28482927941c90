// Command batch compares a run of N light items (one short chunk, one LLM
// call each) through provider batches with the same run online, against
// `oncejob llm-sim`, on fresh Postgres databases:
//
//   - online: the items' model profile calls the provider once per item;
//   - batch: the same profile with provider_batch (max_calls 1,000, linger
//     1s, the batch price at 50 %).
//
// For each it prints the wall time, the server's CPU time per item (user +
// system of the serve process, which runs the workers), the rows the store
// holds per item when the run is complete, and the price per item (the
// journal's billed cost). It checks every item SUCCEEDED and that the
// simulator billed one call per item, online or in batches.
//
//	cd bench && go run ./batch              # N = 10,000
//	cd bench && go run ./batch -items 2000
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
model_profiles:
  online: {model: sim-1, prompt_micros_per_1k: 1000, completion_micros_per_1k: 2000}
  batch: {model: sim-1, prompt_micros_per_1k: 1000, completion_micros_per_1k: 2000,
          provider_batch: {max_calls: 1000, linger: 1s, price_percent: 50}}
pipelines:
  - name: light
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [online, batch]
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
	flag.IntVar(&c.workers, "workers", 2000, "the server's --workers (a batch fills only with as many calls in flight)")
	flag.StringVar(&c.pgURL, "pg", benchkit.EnvOr("BENCH_PG", "postgres://postgres@127.0.0.1:5432"), "Postgres server URL (no database)")
	flag.StringVar(&c.db, "db", "oncejob_bench_batch", "database to create (dropped and created per phase)")
	flag.Parse()
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "bench batch:", err)
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

type result struct {
	wall      time.Duration
	serverCPU time.Duration
	rows      int64
	costMicro int64
	stats     simStats
}

type simStats struct {
	Billed         int `json:"billed_calls"`
	BatchBilled    int `json:"batch_billed_calls"`
	BatchesCreated int `json:"batches_created"`
}

func run(ctx context.Context, c config) error {
	if _, err := benchkit.FindRoot(); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "oncejob-bench-batch-")
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
	online, err := b.phase(ctx, "online")
	if err != nil {
		return fmt.Errorf("online: %w", err)
	}
	batch, err := b.phase(ctx, "batch")
	if err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	n := float64(c.items)
	fmt.Printf("run of %d light items, llm-sim (batch delay 0), serve --workers %d, Postgres; %d CPUs, load %s\n", c.items, c.workers, benchkit.NumCPU(), benchkit.LoadAvg())
	for _, r := range []struct {
		name string
		r    result
	}{{"online", online}, {"batch", batch}} {
		fmt.Printf("  %-6s wall %7.2fs  server CPU %6.3f ms/item  rows %5.2f/item  price %6.2f micros/item  (sim: %d online, %d batch calls, %d batches)\n",
			r.name, r.r.wall.Seconds(), float64(r.r.serverCPU.Microseconds())/1000/n, float64(r.r.rows)/n, float64(r.r.costMicro)/n,
			r.r.stats.Billed, r.r.stats.BatchBilled, r.r.stats.BatchesCreated)
	}
	fmt.Printf("  batch / online: server CPU %.2fx, rows %.2fx, price %.2fx\n",
		batch.serverCPU.Seconds()/online.serverCPU.Seconds(), float64(batch.rows)/float64(online.rows), float64(batch.costMicro)/float64(online.costMicro))
	return nil
}

// phase runs the items with the model profile on a fresh database.
func (b *bench) phase(ctx context.Context, profile string) (result, error) {
	var r result
	if _, err := b.admin.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %q WITH (FORCE)`, b.c.db)); err != nil {
		return r, err
	}
	if _, err := b.admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %q`, b.c.db)); err != nil {
		return r, err
	}
	if _, err := b.http("/oncejob/reset"); err != nil {
		return r, err
	}
	dbURL := fmt.Sprintf("%s/%s?sslmode=disable", b.c.pgURL, b.c.db)
	addr := benchkit.FreeAddr()
	cmd := exec.Command(b.bin, "serve", "--database-url", dbURL, "--migrate", "--grpc-addr", addr, "--pipelines", b.pipes,
		"--llm-base-url", b.simURL+"/v1", "--llm-batch-api", "--workers", fmt.Sprint(b.c.workers), "--relays", "0", "--scheduler=false", "--log-level", "warn")
	lf, err := os.Create(filepath.Join(b.tmp, "serve-"+profile+".log"))
	if err != nil {
		return r, err
	}
	defer lf.Close()
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		return r, err
	}
	if err := benchkit.WaitListen(addr); err != nil {
		_ = cmd.Process.Kill()
		return r, err
	}
	benchkit.Logf("%s phase", profile)
	start := time.Now()
	out, err := exec.CommandContext(ctx, b.bin, "run", "submit", b.items, "--run", profile, "--pipeline", "light",
		"--model-profile", profile, "--wait", "--json", "--addr", addr).CombinedOutput()
	r.wall = time.Since(start)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	if err != nil {
		return r, fmt.Errorf("%v\n%s", err, benchkit.Tail(out))
	}
	r.serverCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	err = b.measure(ctx, dbURL, &r)
	return r, err
}

// measure checks that the phase's database at dbURL has every item
// succeeded, and fills r's cost, rows and simulator stats.
func (b *bench) measure(ctx context.Context, dbURL string, r *result) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var succeeded int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'succeeded'`).Scan(&succeeded); err != nil {
		return err
	}
	if succeeded != b.c.items {
		return fmt.Errorf("%d of %d items succeeded", succeeded, b.c.items)
	}
	if err := conn.QueryRow(ctx, `SELECT coalesce(sum(cost_micros), 0) FROM llm_attempts WHERE billed`).Scan(&r.costMicro); err != nil {
		return err
	}
	tables, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations'`)
	if err != nil {
		return err
	}
	var names []string
	for tables.Next() {
		var name string
		if err := tables.Scan(&name); err != nil {
			return err
		}
		names = append(names, name)
	}
	if err := tables.Err(); err != nil {
		return err
	}
	for _, name := range names {
		var rows int64
		if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %q`, name)).Scan(&rows); err != nil {
			return err
		}
		r.rows += rows
	}
	body, err := b.http("/oncejob/stats")
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, &r.stats); err != nil {
		return err
	}
	if r.stats.Billed+r.stats.BatchBilled != b.c.items {
		return fmt.Errorf("the simulator billed %d online and %d batch calls for %d items", r.stats.Billed, r.stats.BatchBilled, b.c.items)
	}
	return nil
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
