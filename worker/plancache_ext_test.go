package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
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
var planTables = []string{"jobs", "job_checkpoints", "llm_attempts", "outbox", "idempotency_keys"}

// hotStatements are statements that run as named prepared statements
// while storepg's plan gates are open (store/storepg/plan_cache.go): the
// engine's, and submitting's (the key read and the write). A one-chunk
// job's decision-cache read is CheckpointGetByOneStageKey;
// CheckpointGetByStageKeys (two keys or more) runs in phases 0 and 3 too.
var hotStatements = []string{"JobClaim", "CheckpointGetByOneStageKey", "CheckpointWriteMany", "JobPublishMany", "JobGetByIdempotencyKey", "JobSubmitMany"}

// TestGenericPlanTrap runs the engine on a fresh schema the way a new
// deployment does, on one connection (storepg.Open, pool_max_conns=1):
// its first 20 jobs one at a time, so that every statement of a light job
// runs more than five times (Postgres's threshold for a generic plan under
// plan_cache_mode = auto) while the tables hold a few rows; then the
// tables grow to thousands of rows with no ANALYZE (autovacuum off on
// them: a table that grew faster than autovacuum's round); then 40 more
// jobs. Those must not scan jobs, job_checkpoints, llm_attempts or outbox
// sequentially (pg_stat_user_tables): a generic plan made from the
// statistics of a table of a few rows, and kept, would.
//
// Two schemas. Analyzed young: ANALYZE after the first 10 jobs, as
// autovacuum's first round does to a young table; the generic plans made
// after it scan (docs/performance.md, "Generic plans on fresh tables"), so
// the hot statements must have gone back to a plan per execution once the
// gate read those statistics. Never analyzed: the planner costs each table
// at ten pages at least, the generic plans use the indexes, and the hot
// statements must keep them.
func TestGenericPlanTrap(t *testing.T) {
	t.Parallel()
	// One after the other: another schema's migration floods the shared
	// invalidation queue, and a backend that overflows it rebuilds every
	// cached plan, which would hide a trapped one.
	for _, analyze := range []bool{true, false} {
		t.Run(fmt.Sprintf("analyzed=%v", analyze), func(t *testing.T) {
			generic := runPlanTrap(t, analyze)
			for _, name := range hotStatements {
				n, named := generic[name]
				switch {
				case analyze:
					require.Zero(t, n, "%s ran with a generic plan on tables analyzed empty", name)
				case name == "JobSubmitMany":
					// Named, so parsed once; a submission of one costs less
					// planned for its one row than generically (ten), so
					// Postgres plans each (groups of more take the generic).
					require.True(t, named, "%s was not named on tables never analyzed", name)
				default:
					require.Positive(t, n, "%s kept no generic plan on tables never analyzed", name)
				}
			}
		})
	}
}

// runPlanTrap runs the trap's phases, asserts the scans and returns the
// generic plans each hot statement's named statement ran with.
func runPlanTrap(t *testing.T, analyze bool) map[string]int64 {
	ctx := context.Background()
	schemaURL := storepgtest.NewSchemaURL(t)
	u, err := url.Parse(schemaURL)
	require.NoError(t, err)
	schema := u.Query().Get("search_path")
	// The migration's index builds count as sequential scans, flushed when
	// its connection exits: gone before anything is measured.
	migrator, err := pgxpool.New(ctx, schemaURL)
	require.NoError(t, err)
	err = storepg.Migrate(ctx, migrator)
	migrator.Close()
	require.NoError(t, err)
	storepgtest.WaitIdle(t, schema)
	admin, err := pgx.Connect(ctx, schemaURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	// No ANALYZE while the test runs (autovacuum's would invalidate the
	// plans the trap is about), and, for analyze, one now, of this
	// schema's tables only (a bare ANALYZE takes every schema's).
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
	st.TestSignals().PlansChecked.Init()
	st.TestSignals().KeyPlansChecked.Init()
	readKey := func(key string) error {
		_, err := st.JobGetByIdempotencyKey(ctx, &store.JobGetByIdempotencyKeyParams{
			Tenant: "acme", Method: "/oncejob.v1.JobService/SubmitJob", IdempotencyKey: key, Fingerprint: "fp"})
		return err
	}
	reg := registry(t, summarize(1, "1", `{type: object}`, ""))
	// 0. The hot statements on the empty tables, eight times each on the
	// one connection (a generic plan comes after five): jobs that do not
	// exist, and claims of an empty queue.
	for range 8 {
		id := uuid.NewString()
		lease := store.Lease{JobID: id, Owner: "nobody", Attempt: 1}
		cps := []store.StageCheckpoint{{Stage: store.JobStageLLMDone, StageKey: "none", CodeVersion: "v", Output: []byte(`{}`)}}
		_, err := st.JobClaimWork(ctx, &store.JobClaimParams{Owner: "nobody", Limit: 8, LeaseDuration: time.Minute})
		require.NoError(t, err)
		_, err = st.CheckpointGetByStageKeys(ctx, &store.CheckpointGetByStageKeysParams{Tenant: "acme", StageKeys: []string{"none"}, DedupKey: "none"})
		require.NoError(t, err)
		_, err = st.CheckpointGetByStageKeys(ctx, &store.CheckpointGetByStageKeysParams{Tenant: "acme", StageKeys: []string{"none", "neither"}, DedupKey: "none"})
		require.NoError(t, err)
		err = st.CheckpointWriteMany(ctx, &store.CheckpointWriteManyParams{Lease: lease, Checkpoints: cps, Attempt: &store.LLMAttempt{
			JobID: id, JobAttempt: 1, Stage: store.JobStageLLMDone, ProviderKey: "none", Outcome: store.LLMOutcomeSucceeded, Billed: true}})
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = st.JobPublishMany(ctx, &store.JobPublishManyParams{Jobs: []*store.JobPublishParams{{Lease: lease, Output: []byte(`{}`), Message: "none", Checkpoints: cps}}})
		require.NoError(t, err)
		_, err = st.JobHeartbeatMany(ctx, &store.JobHeartbeatManyParams{Leases: []store.Lease{lease}, LeaseDuration: time.Minute})
		require.NoError(t, err)
		require.ErrorIs(t, readKey(id), store.ErrNotFound)
	}
	open, err := st.TestSignals().PlansChecked.Wait()
	require.NoError(t, err)
	require.Equal(t, !analyze, open, "the plan gate's reading of the statistics")
	open, err = st.TestSignals().KeyPlansChecked.Wait()
	require.NoError(t, err)
	require.Equal(t, !analyze, open, "the key read's plan gate's reading of the statistics")

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
	t.Cleanup(func() { cancel(); <-done })
	runOneByOne := func(first, n int) {
		for i := first; i < first+n; i++ {
			job := submit(t, st, reg, "acme", fmt.Sprintf("Document %d of a new deployment.", i))
			require.Equal(t, store.JobStatusSucceeded, waitTerminal(t, st, job).Status)
		}
	}

	// 1. The first jobs of the deployment, one at a time.
	runOneByOne(0, 10)

	// 2. The tables grow, not analyzed: 5,000 jobs that ran.
	_, err = admin.Exec(ctx, growTables, 5000)
	require.NoError(t, err)
	before := scans(t, st.Pool(), admin, schema)

	// 3. More jobs, measured: the counters are read on the worker's one
	// connection while it is idle (stopping the worker can cancel a claim,
	// and pgx closes a connection whose query was cancelled).
	var jobs []*store.Job
	for i := range 40 {
		jobs = append(jobs, submit(t, st, reg, "acme", fmt.Sprintf("Later document %d.", i)))
	}
	for _, j := range jobs {
		require.Equal(t, store.JobStatusSucceeded, waitTerminal(t, st, j).Status)
		require.NoError(t, readKey(j.IdempotencyKey))
	}
	// The read of many keys (a job of several chunks), as often on the
	// grown tables.
	for range 8 {
		_, err := st.CheckpointGetByStageKeys(ctx, &store.CheckpointGetByStageKeysParams{Tenant: "acme", StageKeys: []string{"none", "neither"}, DedupKey: "none"})
		require.NoError(t, err)
	}
	generic := genericPlans(t, st.Pool())
	after := scans(t, st.Pool(), admin, schema)
	for _, table := range planTables {
		seq, idx := after[table][0]-before[table][0], after[table][1]-before[table][1]
		t.Logf("%s: %d sequential scans, %d index scans during 40 jobs", table, seq, idx)
		require.Zero(t, seq, "%s was scanned sequentially by the engine after it grew", table)
	}
	require.Positive(t, after["jobs"][1]-before["jobs"][1], "the engine read jobs by its indexes")
	t.Logf("generic plans of the named statements: %v", generic)
	return generic
}

// growTables inserts $1 succeeded light jobs and what they wrote: an
// idempotency key, a document, an LLM checkpoint, a journal row, two
// events and (by the trigger jobs_announce) an outbox row each.
const growTables = `WITH job AS (
    INSERT INTO jobs (id, tenant, idempotency_key, dedup_key, pipeline, pipeline_version, status, stage, attempt,
        document_sha256, document_media_type, document_size_bytes, output, finished_at)
    SELECT gen_random_uuid(), 'acme', 'grown-' || g, md5('dedup' || g), 'summarize', 1, 'succeeded', 'published', 1,
        md5('doc' || g), 'text/plain', 40, '{"summary": "grown"}', now()
    FROM generate_series(1, $1::integer) AS g
    RETURNING id, tenant, document_sha256, idempotency_key
),
idem AS (
    INSERT INTO idempotency_keys (tenant, method, idem_key, fingerprint, job_id)
    SELECT tenant, '/oncejob.v1.JobService/SubmitJob', idempotency_key, 'fp', id FROM job
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
// connection, how many generic plans it ran with (none: not prepared).
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
