package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

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

// durableArgs is the River durable peer's job: a document, as the light
// job's.
type durableArgs struct {
	Num      int    `json:"num"`
	Document string `json:"document"`
}

func (durableArgs) Kind() string { return "durable" }

// durableSchema is the River durable peer's own tables: the job's result
// and an outbox row, as oncejob's light job writes its output and its
// published event's outbox row.
const durableSchema = `
CREATE TABLE bench_results (
	job_id     bigint PRIMARY KEY,
	output     jsonb NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE bench_outbox (
	id         bigserial PRIMARY KEY,
	job_id     bigint NOT NULL,
	topic      text NOT NULL,
	payload    jsonb NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);`

// durableWorker writes the job's result row and an outbox row and
// completes the job, all in one transaction (river.JobCompleteTx): the
// effect and the completion commit together, once.
type durableWorker struct {
	river.WorkerDefaults[durableArgs]
	pool *pgxpool.Pool
}

func (w *durableWorker) Work(ctx context.Context, j *river.Job[durableArgs]) error {
	out, err := json.Marshal(map[string]any{"summary": "summary of " + j.Args.Document, "chars": len(j.Args.Document)})
	if err != nil {
		return err
	}
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `INSERT INTO bench_results (job_id, output) VALUES ($1, $2)`, j.ID, out); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO bench_outbox (job_id, topic, payload) VALUES ($1, 'job.succeeded', $2)`, j.ID, out); err != nil {
		return err
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, j); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// riverKind is the work of a River phase's jobs.
type riverKind int

const (
	riverNoop    riverKind = iota // riverbench's no-op job
	riverDurable                  // a result and an outbox row, JobCompleteTx
	riverSame                     // the light job's work (riversame.go)
)

// riverKinds are the River phases, in the order they run.
var riverKinds = []riverKind{riverNoop, riverDurable, riverSame}

// phase is the kind's name in -phases.
func (k riverKind) phase() string {
	switch k {
	case riverDurable:
		return "riverdurable"
	case riverSame:
		return "riversame"
	}
	return "river"
}

// system is the kind's name in the tables.
func (k riverKind) system() string {
	switch k {
	case riverDurable:
		return sysRiverDurable
	case riverSame:
		return sysRiverSame
	}
	return sysRiver
}

// riverRun is one River phase: n jobs of kind, named name in the logs;
// with cost, the working client's pool connects through the counting proxy
// and the database's counters are read around the run. beforeStart, if
// set, runs once the jobs are inserted, just before the clock starts.
type riverRun struct {
	name        string
	n           int
	kind        riverKind
	cost        bool
	beforeStart func(context.Context) error
}

// riverPhase works the River jobs of rr in this process and returns the
// rate from client.Start to the last completion.
func (e *engineBench) riverPhase(ctx context.Context, rr riverRun) (result, costSample, error) {
	c, n := e.c, rr.n
	tag := rr.kind.phase() + "-" + rr.name
	if err := recreateDB(ctx, e.admin, c.riverDB); err != nil {
		return result{}, costSample{}, err
	}
	dbURL := c.pgURL + "/" + c.riverDB + "?sslmode=disable"
	inspect, err := riverFill(ctx, dbURL, tag, n, rr.kind, rr.cost)
	if err != nil {
		return result{}, costSample{}, err
	}
	if rr.kind == riverSame {
		if err := httpPost(ctx, e.simURL+"/oncejob/reset", ""); err != nil {
			return result{}, costSample{}, fmt.Errorf("reset simulator: %w", err)
		}
	}

	var rc riverCost
	workURL := e.appURL(c.riverDB)
	if rr.cost {
		if workURL, err = rc.start(ctx, c, dbURL); err != nil {
			return result{}, costSample{}, err
		}
		defer rc.proxy.close()
	}
	// As the river CLI opens its pool: pgxpool defaults.
	pool, err := pgxpool.New(ctx, workURL)
	if err != nil {
		return result{}, costSample{}, err
	}
	defer pool.Close()
	client, events, cancelSub, err := riverClient(pool, c.riverMaxWorkers, n, rr.kind, e.simURL)
	if err != nil {
		return result{}, costSample{}, err
	}
	defer cancelSub()
	if rr.beforeStart != nil {
		if err := rr.beforeStart(ctx); err != nil {
			return result{}, costSample{}, err
		}
	}

	logf("%s: starting the client, MaxWorkers %d", tag, c.riverMaxWorkers)
	var waits *waitSampler
	if !rr.cost {
		waits = startWaitSampler(ctx, c.pgURL, c.riverDB)
		defer waits.finish() // on an error; finishing twice is harmless
	}
	waitDesc := ""
	pg0 := e.pgCPU(ctx)
	t0 := time.Now()
	if err := client.Start(ctx); err != nil {
		return result{}, costSample{}, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	}()
	last, err := waitRiverCompleted(ctx, events, n, c.phaseTimeout)
	if err != nil {
		return result{}, costSample{}, err
	}
	elapsed := last.Sub(t0)
	pgCPU := e.pgCPU(ctx) - pg0
	if waits != nil {
		waitDesc = waits.finish()
	}
	if err := stopRiver(ctx, client); err != nil {
		return result{}, costSample{}, err
	}
	pool.Close()
	// Checked on a connection of its own, after the counters (cost).
	if rr.cost {
		if err := rc.finish(ctx, dbURL); err != nil {
			return result{}, costSample{}, err
		}
	}
	if err := checkRiverDone(ctx, dbURL, n, rr.kind); err != nil {
		return result{}, costSample{}, err
	}
	if rr.kind == riverSame {
		if billed, err := simBilled(ctx, e.simURL); err != nil || billed != int64(n) {
			return result{}, costSample{}, fmt.Errorf("river same-work: %d calls billed by the simulator (%v), want %d", billed, err, n)
		}
	}
	sys := rr.kind.system()
	r := result{scenario: "light", system: sys, processes: 1, jobs: n, elapsed: elapsed, rate: float64(n) / elapsed.Seconds(), waits: waitDesc, pgCPU: pgCPU}
	if rr.name == "steady" {
		r.scenario = "steady"
	}
	logf("%s: %d jobs in %s: %.0f jobs/s", tag, n, elapsed.Round(time.Millisecond), r.rate)
	var s costSample
	if rr.cost {
		s = rc.sample(ctx, sys, tag, dbURL, n, elapsed, inspect)
	}
	return r, s, nil
}

// stopRiver stops client, waiting up to 15 s for it.
func stopRiver(ctx context.Context, client *river.Client[pgx.Tx]) error {
	stopCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return fmt.Errorf("river stop: %w", err)
	}
	return nil
}

// riverFill migrates River's schema into the database at dbURL (and the
// durable worker's tables), inserts n jobs and lets the database settle, on
// a pool of its own closed before the measured run. With cost, it reports
// whether pg_walinspect could be enabled.
func riverFill(ctx context.Context, dbURL, tag string, n int, kind riverKind, cost bool) (bool, error) {
	setup, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return false, err
	}
	defer setup.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(setup), nil)
	if err != nil {
		return false, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return false, fmt.Errorf("river migrate: %w", err)
	}
	if kind != riverNoop {
		if _, err := setup.Exec(ctx, durableSchema); err != nil {
			return false, err
		}
	}
	if kind == riverSame {
		if _, err := setup.Exec(ctx, sameSchema); err != nil {
			return false, err
		}
	}
	inserter, err := river.NewClient(riverpgxv5.New(setup), &river.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return false, err
	}
	logf("%s: inserting %d jobs (InsertMany, batches of 5,000)", tag, n)
	for inserted := 0; inserted < n; {
		batch := make([]river.InsertManyParams, min(5000, n-inserted))
		for i := range batch {
			inserted++
			var args river.JobArgs = benchArgs{Num: inserted}
			doc := fmt.Sprintf("%d a one-chunk document for the light pipeline", inserted)
			switch kind {
			case riverDurable:
				args = durableArgs{Num: inserted, Document: doc}
			case riverSame:
				args = sameArgs{Num: inserted, Document: doc}
			}
			batch[i] = river.InsertManyParams{Args: args}
		}
		if _, err := inserter.InsertMany(ctx, batch); err != nil {
			return false, fmt.Errorf("river insert: %w", err)
		}
	}
	inspect := cost && enableWALInspect(ctx, setup)
	if err := settle(ctx, setup); err != nil {
		return false, err
	}
	setup.Close()
	return inspect, nil
}

// riverCost is what a cost run of riverPhase reads before the run: the
// counting proxy the working pool goes through, the database's counters
// and the cluster's background.
type riverCost struct {
	proxy         *pgCounter
	before, after dbSnap
	bg            background
	counts        protoCounts
}

// start reads the counters over a quiet window, then starts the counting
// proxy in front of c's server; it returns the URL of the database through
// the proxy. The caller closes rc.proxy.
func (rc *riverCost) start(ctx context.Context, c config, dbURL string) (string, error) {
	var err error
	if rc.before, rc.bg, err = quietWindow(ctx, dbURL); err != nil {
		return "", err
	}
	upstream, err := pgHostPort(c.pgURL)
	if err != nil {
		return "", err
	}
	if rc.proxy, err = startPGCounter(upstream); err != nil {
		return "", err
	}
	workURL, err := viaProxy(c.pgURL, rc.proxy.addr(), c.riverDB)
	if err != nil {
		rc.proxy.close()
		return "", err
	}
	return workURL, nil
}

// finish reads the proxy's counts, then the database's counters once the
// closed backends have reported.
func (rc *riverCost) finish(ctx context.Context, dbURL string) error {
	rc.counts = rc.proxy.counts()
	time.Sleep(1100 * time.Millisecond) // the closed backends report
	var err error
	rc.after, err = takeSnap(ctx, dbURL)
	return err
}

// sample is the run's cost sample for system sys, n jobs in elapsed, with
// the database's own WAL when inspect; it logs the per job figures.
func (rc *riverCost) sample(ctx context.Context, sys, tag, dbURL string, n int, elapsed time.Duration, inspect bool) costSample {
	// The bench's own transaction on the database: the "before" reading.
	s := costBetween(sys, n, elapsed, rc.counts, rc.before, rc.after, 1, rc.bg)
	if inspect {
		s.db = readDBWAL(ctx, dbURL, rc.before, rc.after)
	}
	pj := s.perJob()
	logf("%s: %.2f statements, %.2f commits, %.3f WAL syncs (cluster), %.0f WAL bytes (this database) per job",
		tag, pj.statements, pj.commits, pj.walSyncs, pj.dbBytes)
	return s
}

// riverClient is a River client on pool working the jobs of kind (the
// same-work job calls the simulator at simURL), with cmd/river/riverbench's fetch settings, and its subscription to
// the ends of n jobs with the function that cancels it.
func riverClient(pool *pgxpool.Pool, maxWorkers, n int, kind riverKind, simURL string) (*river.Client[pgx.Tx], <-chan *river.Event, func(), error) {
	workers := river.NewWorkers()
	switch kind {
	case riverDurable:
		river.AddWorker(workers, &durableWorker{pool: pool})
	case riverSame:
		river.AddWorker(workers, newSameWorker(pool, simURL))
	default:
		river.AddWorker(workers, &benchWorker{})
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		// cmd/river/riverbench's settings.
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers:           workers,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	events, cancelSub := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: max(n, 1000),
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	return client, events, cancelSub, nil
}

// waitRiverCompleted reads events until n jobs completed and returns when
// the last did; a job failed or cancelled, ctx's end or timeout fails.
func waitRiverCompleted(ctx context.Context, events <-chan *river.Event, n int, timeout time.Duration) (time.Time, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	var last time.Time
	for done := 0; done < n; {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-deadline.C:
			return last, fmt.Errorf("%d of %d completed after %s", done, n, timeout)
		case ev := <-events:
			if ev == nil {
				return last, errors.New("river subscription closed")
			}
			if ev.Kind != river.EventKindJobCompleted {
				return last, fmt.Errorf("river job %d: %s", ev.Job.ID, ev.Kind)
			}
			last = time.Now()
			done++
		}
	}
	return last, nil
}

// checkRiverDone checks, on a connection of its own, that the n jobs are
// completed in river_job and, unless no-op, that each wrote its result and
// outbox rows (and the same-work job its other rows).
func checkRiverDone(ctx context.Context, dbURL string, n int, kind riverKind) error {
	check, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer check.Close(context.WithoutCancel(ctx))
	var completed, results, outbox int
	if err := check.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&completed); err != nil {
		return err
	}
	if completed != n {
		return fmt.Errorf("river: %d jobs completed in the table, want %d", completed, n)
	}
	if kind != riverNoop {
		if err := check.QueryRow(ctx, `SELECT (SELECT count(DISTINCT job_id) FROM bench_results), (SELECT count(DISTINCT job_id) FROM bench_outbox)`).Scan(&results, &outbox); err != nil {
			return err
		}
		if results != n || outbox != n {
			return fmt.Errorf("%s: %d result rows and %d outbox rows, want %d each", kind.system(), results, outbox, n)
		}
	}
	if kind == riverSame {
		return checkSameDone(ctx, check, n)
	}
	return nil
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
