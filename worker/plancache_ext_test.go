package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/worker"
)

// planTables are the tables the generic-plan trap would have the engine
// scan (docs/performance.md, "Generic plans on fresh tables").
var planTables = []string{"jobs", "job_checkpoints", "llm_attempts", "outbox"}

// hotStatements are statements that run as named prepared statements
// while storepg's plan gate is open (store/storepg/plan_cache.go).
var hotStatements = []string{"JobClaim", "CheckpointGetByStageKeys", "CheckpointWriteMany", "JobPublishMany"}

// TestGenericPlanTrap runs the engine on a fresh schema the way a new
// deployment does, on one connection (storepg.Open, pool_max_conns=1):
// its first jobs one at a time, so that every statement runs more than
// five times (Postgres's threshold for a generic plan under
// plan_cache_mode = auto) while the tables hold a few rows; then the
// tables grow to thousands of rows with no ANALYZE (autovacuum off on
// them: a table that grew faster than autovacuum's round); then more jobs.
// Those last jobs must not scan jobs, job_checkpoints, llm_attempts or
// outbox sequentially (pg_stat_user_tables): a plan made on a table of a
// few rows and kept would. Two schemas: analyzed empty (as a deploy's
// vacuumdb --analyze, or autovacuum's first ANALYZE of a young table,
// leaves the statistics), where the hot statements must plan every
// execution; and never analyzed, where the planner costs each table at
// ten pages at least, their generic plans use the indexes, and the hot
// statements must keep them.
func TestGenericPlanTrap(t *testing.T) {
	t.Parallel()
	for _, analyzed := range []bool{true, false} {
		t.Run(fmt.Sprintf("analyzed=%v", analyzed), func(t *testing.T) {
			t.Parallel()
			generic := runPlanTrap(t, analyzed)
			for _, name := range hotStatements {
				if analyzed {
					require.Zero(t, generic[name], "%s ran as a named statement with a generic plan on tables analyzed empty", name)
				} else {
					require.Positive(t, generic[name], "%s kept no generic plan on tables never analyzed", name)
				}
			}
		})
	}
}

// runPlanTrap runs the trap's three phases, asserts the scans and returns
// the generic plans each hot statement's named statement made.
func runPlanTrap(t *testing.T, analyze bool) map[string]int64 {
	ctx := context.Background()
	schemaURL := storepgtest.NewSchemaURL(t)
	u, err := url.Parse(schemaURL)
	require.NoError(t, err)
	schema := u.Query().Get("search_path")
	admin, err := pgx.Connect(ctx, schemaURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	require.NoError(t, storepg.Migrate(ctx, poolOf(t, admin.Config().ConnString())))
	// No ANALYZE while the test runs (autovacuum's would invalidate the
	// plans the trap is about), and, for analyze, one now of this schema's
	// tables only: a bare ANALYZE takes every schema's.
	alter := "ALTER TABLE ' || t || ' SET (autovacuum_enabled = off)"
	if analyze {
		alter += "; ANALYZE ' || t || '"
	}
	_, err = admin.Exec(ctx, `DO $$ DECLARE t text; BEGIN
		FOR t IN SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = current_schema() LOOP
			EXECUTE '`+alter+`';
		END LOOP; END $$`)
	require.NoError(t, err)

	st, err := storepg.Open(ctx, schemaURL+"&pool_max_conns=1")
	require.NoError(t, err)
	t.Cleanup(st.Close)
	reg := registry(t, summarize(1, "1", `{type: object}`, ""))
	sim, err := llmsim.Start("", llmsim.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	provider, err := llm.NewOpenAI(llm.Config{BaseURL: sim.URL, Timeout: 10 * time.Second})
	require.NoError(t, err)
	w, err := worker.New(worker.Config{
		Store: st, Provider: provider, Pipelines: reg, Concurrency: 8,
		LeaseDuration: 30 * time.Second, PollInterval: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(wctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)

	// 1. The first jobs, one at a time: every statement of a light job
	// runs 10 times on the one connection while its tables are small.
	for i := range 10 {
		job := submit(t, st, reg, "acme", fmt.Sprintf("First document %d of a new deployment.", i))
		require.Equal(t, store.JobStatusSucceeded, waitTerminal(t, st, job).Status)
	}

	// 2. The tables grow, not analyzed: 5,000 jobs that ran.
	_, err = admin.Exec(ctx, growTables, 5000)
	require.NoError(t, err)
	before := scans(t, st.Pool(), admin, schema)

	// 3. More jobs, measured.
	var jobs []*store.Job
	for i := range 40 {
		jobs = append(jobs, submit(t, st, reg, "acme", fmt.Sprintf("Later document %d.", i)))
	}
	for _, j := range jobs {
		require.Equal(t, store.JobStatusSucceeded, waitTerminal(t, st, j).Status)
	}
	stop()
	generic := genericPlans(t, st.Pool())
	after := scans(t, st.Pool(), admin, schema)
	for _, table := range planTables {
		seq, idx := after[table][0]-before[table][0], after[table][1]-before[table][1]
		t.Logf("%s: %d sequential scans, %d index scans during 40 jobs (analyzed empty: %v)", table, seq, idx, analyze)
		require.Zero(t, seq, "%s was scanned sequentially by the engine after it grew", table)
	}
	require.Positive(t, after["jobs"][1]-before["jobs"][1], "the engine read jobs by its indexes")
	t.Logf("generic plans of the named statements: %v", generic)
	var analyzed []string
	require.NoError(t, admin.QueryRow(ctx, `SELECT coalesce(array_agg(relname::text), '{}') FROM pg_stat_user_tables
		WHERE schemaname = $1 AND (last_autoanalyze IS NOT NULL OR last_autovacuum IS NOT NULL)`, schema).Scan(&analyzed))
	t.Logf("DEBUG autovacuumed: %v", analyzed)
	return generic
}

// poolOf is a pool of one connection on url, closed at cleanup.
func poolOf(t *testing.T, url string) *pgxpool.Pool {
	config, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	config.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), config)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// growTables inserts $1 succeeded light jobs and what they wrote: a
// document, an LLM checkpoint, a journal row, two events and (by the
// trigger jobs_announce) an outbox row each.
const growTables = `WITH job AS (
    INSERT INTO jobs (id, tenant, idempotency_key, dedup_key, pipeline, pipeline_version, status, stage, attempt,
        document_sha256, document_media_type, document_size_bytes, output, finished_at)
    SELECT gen_random_uuid(), 'acme', 'grown-' || g, md5('dedup' || g), 'summarize', 1, 'succeeded', 'published', 1,
        md5('doc' || g), 'text/plain', 40, '{"summary": "grown"}', now()
    FROM generate_series(1, $1::integer) AS g
    RETURNING id, tenant, document_sha256
),
doc AS (
    INSERT INTO documents (tenant, sha256, media_type, size_bytes, data)
    SELECT tenant, document_sha256, 'text/plain', 40, '\x00' FROM job
),
checkpoint AS (
    INSERT INTO job_checkpoints (job_id, tenant, stage, chunk, stage_key, code_version, attempt, output)
    SELECT id, tenant, 'llm_done', 0, md5('stage' || id::text), 'v1', 1, '\x00' FROM job
),
attempt AS (
    INSERT INTO llm_attempts (job_id, tenant, job_attempt, stage, chunk, provider_key, outcome, billed, provider_request_id)
    SELECT id, tenant, 1, 'llm_done', 0, md5('key' || id::text), 'succeeded', true, 'req-' || id::text FROM job
)
INSERT INTO job_events (job_id, tenant, seq, status, stage, attempt)
SELECT id, tenant, s, 'running', 'uploaded', 1 FROM job, generate_series(1, 2) AS s`

// scans reads (sequential, index) scans by table once the store's
// connection and admin have flushed their counters: a backend flushes
// pending statistics when it goes idle after pg_stat_force_next_flush.
func scans(t *testing.T, pool *pgxpool.Pool, admin *pgx.Conn, schema string) map[string][2]int64 {
	ctx := context.Background()
	_, err := pool.Exec(ctx, "SELECT pg_stat_force_next_flush()")
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "SELECT pg_stat_force_next_flush()")
	require.NoError(t, err)
	rows, err := admin.Query(ctx, `SELECT relname, coalesce(seq_scan, 0), coalesce(idx_scan, 0)
		FROM pg_stat_user_tables WHERE schemaname = $1`, schema)
	require.NoError(t, err)
	out := map[string][2]int64{}
	for rows.Next() {
		var name string
		var seq, idx int64
		require.NoError(t, rows.Scan(&name, &seq, &idx))
		out[name] = [2]int64{seq, idx}
	}
	require.NoError(t, rows.Err())
	return out
}

// genericPlans is, for each hot statement prepared on the pool's one
// connection, how many generic plans it ran with.
func genericPlans(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	rows, err := pool.Query(context.Background(), `SELECT statement, generic_plans FROM pg_prepared_statements`)
	require.NoError(t, err)
	out := map[string]int64{}
	for rows.Next() {
		var sql string
		var n int64
		require.NoError(t, rows.Scan(&sql, &n))
		for _, name := range hotStatements {
			if strings.Contains(sql, "-- name: "+name+" ") {
				out[name] += n
			}
		}
	}
	require.NoError(t, rows.Err())
	return out
}
