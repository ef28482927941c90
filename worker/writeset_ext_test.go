package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
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

// writeSet is what the engine wrote in one schema: rows inserted, updated
// and deleted by table (pg_stat_user_tables), and the WAL records that
// touch the schema's relations (pg_walinspect, by relfilenode; commit
// records, which name no relation, are not counted).
type writeSet struct {
	rows     map[string]int64
	walBytes int64
	records  int64
	// fpiBytes is the part of walBytes that is full-page images: written
	// for a page's first change after a Postgres checkpoint, so they depend
	// on when the checkpointer ran, not on the write set.
	fpiBytes int64
}

func (w writeSet) total() (n int64) {
	for table, r := range w.rows {
		if !strings.HasSuffix(table, "(hot)") { // a HOT update is counted in its table's updates
			n += r
		}
	}
	return n
}

// schemaRows reads the schema's row counters once the schema's
// connections have exited and flushed their statistics
// (storepgtest.WaitIdle).
func schemaRows(t *testing.T, conn *pgx.Conn, schema string) map[string]int64 {
	t.Helper()
	storepgtest.WaitIdle(t, schema)
	// Unlogged tables are not counted: the provider limits' row is pacing
	// state, written per draw (not per job) and never to the WAL.
	rows, err := conn.Query(context.Background(), `SELECT s.relname, n_tup_ins + n_tup_upd + n_tup_del
		FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE schemaname = $1 AND c.relpersistence = 'p'
		UNION ALL SELECT s.relname || '(hot)', n_tup_hot_upd
		FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE schemaname = $1 AND c.relpersistence = 'p' AND n_tup_hot_upd > 0`, schema)
	require.NoError(t, err)
	m, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (kv [2]any, err error) {
		var name string
		var n int64
		err = r.Scan(&name, &n)
		return [2]any{name, n}, err
	})
	require.NoError(t, err)
	out := map[string]int64{}
	for _, kv := range m {
		out[kv[0].(string)] = kv[1].(int64)
	}
	return out
}

// schemaWAL sums the WAL records between two LSNs that touch a relation of
// the schema (its tables, indexes and TOAST).
func schemaWAL(t *testing.T, conn *pgx.Conn, schema, from, to string) (bytes, records, fpi int64) {
	t.Helper()
	ctx := context.Background()
	// pg_walinspect reads only flushed WAL, and to was an insert position.
	require.Eventually(t, func() bool {
		var flushed bool
		require.NoError(t, conn.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, to).Scan(&flushed))
		return flushed
	}, 30*time.Second, 10*time.Millisecond, "WAL up to %s never flushed", to)
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`); err != nil {
		// Two tests creating it at once: one wins, the other finds it.
		_, err = conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`)
		require.NoError(t, err, "pg_walinspect (contrib, in Debian's postgresql-15)")
	}
	var nodes []uint32
	require.NoError(t, conn.QueryRow(ctx, `
		WITH rel AS (
			SELECT c.oid, c.reltoastrelid FROM pg_class c WHERE c.relnamespace = $1::regnamespace
		)
		SELECT array_agg(n) FROM (
			SELECT pg_relation_filenode(oid) AS n FROM rel
			UNION SELECT pg_relation_filenode(reltoastrelid) FROM rel WHERE reltoastrelid <> 0
			UNION SELECT pg_relation_filenode(i.indexrelid) FROM pg_index i JOIN rel ON i.indrelid = rel.reltoastrelid
		) AS node WHERE n IS NOT NULL`, schema).Scan(&nodes))
	// Each record's relations, read from its block references, matched
	// against the schema's: one pass over the WAL between the two LSNs.
	require.NoError(t, conn.QueryRow(ctx, `
		SELECT coalesce(sum(w.record_length), 0)::bigint, count(*), coalesce(sum(w.fpi_length), 0)::bigint
		FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn) AS w
		WHERE w.block_ref IS NOT NULL AND EXISTS (
			SELECT 1 FROM regexp_matches(w.block_ref, 'rel \d+/\d+/(\d+)', 'g') AS m
			WHERE m[1]::oid = ANY($3::oid[]))`, from, to, nodes).Scan(&bytes, &records, &fpi))
	return bytes, records, fpi
}

func lsn(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var l string
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&l))
	return l
}

// measureWriteSet submits jobs documents on a pool of its own, then runs a
// worker on another until every job succeeded, and returns what the worker
// wrote: the submissions are not the engine's.
func measureWriteSet(t *testing.T, pipelineYAML string, docs []string) writeSet {
	t.Helper()
	ctx := context.Background()
	schemaURL := storepgtest.NewSchemaURL(t)
	u, err := url.Parse(schemaURL)
	require.NoError(t, err)
	schema := u.Query().Get("search_path")
	admin, err := pgx.Connect(ctx, storepgtest.DatabaseURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })

	open := func() (*storepg.Store, *pgxpool.Pool) {
		pool, err := pgxpool.New(ctx, schemaURL)
		require.NoError(t, err)
		require.NoError(t, storepg.Migrate(ctx, pool))
		return storepg.New(pool), pool
	}
	reg := registry(t, pipelineYAML)
	subSt, subPool := open()
	var submitted []*store.Job
	for _, d := range docs {
		submitted = append(submitted, submit(t, subSt, reg, "acme", d))
	}
	subSt.Close()
	subPool.Close()
	before := schemaRows(t, admin, schema)
	from := lsn(t, admin)

	st, pool := open()
	sim, err := llmsim.Start("", llmsim.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	provider, err := llm.NewOpenAI(llm.Config{BaseURL: sim.URL, Timeout: 10 * time.Second})
	require.NoError(t, err)
	w, err := worker.New(worker.Config{
		Store: st, Provider: provider, Pipelines: reg, Concurrency: len(docs),
		LeaseDuration: 30 * time.Second, PollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(wctx) }()
	for _, j := range submitted {
		require.Equal(t, store.JobStatusSucceeded, waitTerminal(t, st, j).Status)
	}
	cancel()
	<-done
	st.Close()
	pool.Close()
	to := lsn(t, admin)

	after := schemaRows(t, admin, schema)
	ws := writeSet{rows: map[string]int64{}}
	for table, n := range after {
		if d := n - before[table]; d != 0 {
			ws.rows[table] = d
		}
	}
	ws.walBytes, ws.records, ws.fpiBytes = schemaWAL(t, admin, schema, from, to)
	return ws
}

func (w writeSet) String() string {
	var parts []string
	for table, n := range w.rows {
		parts = append(parts, fmt.Sprintf("%s=%d", table, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// TestLightJobWriteSet measures the engine's write set per job on Postgres:
// rows (inserted + updated + deleted, all tables) and the WAL of the
// schema's relations, for a light job (one chunk, one LLM call) and a
// realistic 4-chunk one (docs/performance.md, "Rows and WAL per job"). It
// holds the light job to 9 rows and 7 KB: the claim (job row, running
// event), the LLM answer (journal row, chunk checkpoint, job row) and the
// publish (job row, succeeded event, outbox row, and its routing queue row,
// migration 0033: 54 bytes of heap and a primary-key entry that spare the
// relay an update of the outbox row, docs/performance.md, "A narrow routing
// queue"); the deterministic stages write no checkpoint and stage-only
// advances no event.
func TestLightJobWriteSet(t *testing.T) {
	t.Parallel()
	const jobs = 50
	light := make([]string, jobs)
	for i := range light {
		light[i] = fmt.Sprintf("Light document %d: one short chunk.", i)
	}
	// A Postgres checkpoint inside the run adds full-page images, 8 KiB
	// each, that say when the checkpointer ran, not what a job writes (the
	// CI machine's runs cross several): measured again, up to three
	// times, and if every run had some, held without them.
	var ws writeSet
	for run := 1; run <= 3; run++ {
		ws = measureWriteSet(t, summarize(1, "1", `{type: object}`, ""), light)
		if ws.fpiBytes == 0 {
			break
		}
		t.Logf("run %d: a checkpoint fell inside it: %d bytes of full-page images", run, ws.fpiBytes)
	}
	rows, wal := float64(ws.total())/jobs, float64(ws.walBytes-ws.fpiBytes)/jobs
	t.Logf("light job: %.1f rows and %.0f bytes of WAL (%.1f records; %d bytes of full-page images not counted) per job (%s)",
		rows, wal, float64(ws.records)/jobs, ws.fpiBytes, ws)
	require.EqualValues(t, jobs, ws.rows["llm_attempts"], "one journal row per job")
	require.EqualValues(t, jobs, ws.rows["outbox"], "one outbox row per job")
	require.EqualValues(t, jobs, ws.rows["outbox_unrouted"], "one routing queue row per job")
	require.LessOrEqual(t, rows, 9.0, "rows per light job")
	// 7 KB: how many of the job row's updates Postgres makes HOT (no index
	// entries) depends on the free space on its page when they come, and
	// varies from run to run: 5.9-6.5 KB a job were measured on one tree
	// (HOT updates 16-50 of 150), so 6 KB flaked. The figure is measured,
	// not held, in bench/ (docs/performance.md, "Rows and WAL per job").
	require.LessOrEqual(t, wal, 7*1024.0, "WAL bytes per light job")

	const chunked = 20
	docs := make([]string, chunked)
	for i := range docs {
		var words []string
		for w := range 30 {
			words = append(words, fmt.Sprintf("doc%dword%d", i, w))
		}
		docs[i] = strings.Join(words, " ")
	}
	ws = measureWriteSet(t, summarize(1, "1", `{type: object}`, "    chunking: {size: 100, overlap: 10}\n"), docs)
	t.Logf("4-chunk job: %.1f rows and %.0f bytes of WAL per job (%s)",
		float64(ws.total())/chunked, float64(ws.walBytes)/chunked, ws)
	require.EqualValues(t, 4*chunked, ws.rows["llm_attempts"], "a call per chunk, four chunks")
}
