package storepg

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
	"github.com/oncejob/oncejob/testsignal"
)

// Plans (docs/architecture.md, "Generic plans for the engine, custom plans
// for the rest"). The pool Open makes runs every statement as an unnamed
// one (pgx's QueryExecModeCacheDescribe), which Postgres plans at every
// execution with the statistics and the size of the moment: the generic-
// plan trap (docs/performance.md, "Generic plans on fresh tables") cannot
// hold such a statement. The engine's per-job statements are the
// exception: they run as named prepared statements (hot), which Postgres,
// under plan_cache_mode = auto, plans once for the connection after five
// executions when that generic plan costs no more - while planGate lets
// them.
//
// What the trap needs: a generic plan made while the statistics say a
// table is (next to) empty, then kept while the table grows, until the next
// ANALYZE. Every lookup falls into it, the primary-key ones included: with
// the statistics of a table analyzed at 0-150 rows, the generic plans of
// CheckpointWriteMany, JobPublishMany, JobHeartbeatMany and JobClaim scan
// jobs sequentially; CheckpointGetByStageKeys scans job_checkpoints up to
// 1,000-3,000 rows. A table never analyzed is costed at 10 pages at least
// and every one of them takes its index then (EXPLAIN of each generic plan
// at 0 to 10,000 rows, analyzed or not; docs/performance.md). So the hot
// statements keep generic plans only while each table they read is either
// never analyzed or analyzed at planGateRows rows or more; an ANALYZE that
// changes that invalidates the plans made before it, and the gate is asked
// again every planGateInterval. Between an ANALYZE of a small table and
// the next check, a generic plan can scan that table, which is small then.

// planGateRows is the least analyzed row count of every table the hot
// statements read at which their generic plans are taken: the largest
// table seen scanned by one (CheckpointGetByStageKeys) had 1,000 rows, and
// none at 3,000.
const planGateRows = 10_000

// planGateInterval is how often the gate reads the tables' statistics.
const planGateInterval = 5 * time.Second

// planGateQuery: are the tables the hot statements read each never
// analyzed (reltuples -1) or analyzed at $1 rows or more? outbox, written
// by the trigger jobs_announce, is not among them: the trigger's lookup
// plans at every execution (migration 0030).
const planGateQuery = `SELECT count(*) = 4 AND coalesce(bool_and(c.reltuples < 0 OR c.reltuples >= $1), false)
FROM pg_catalog.pg_class c
WHERE c.oid IN (to_regclass('jobs'), to_regclass('job_checkpoints'), to_regclass('llm_attempts'), to_regclass('documents'))`

// keyPlanGateQuery is planGateQuery for submitting: the key read
// (JobGetByIdempotencyKey, SubmitJob's read before every write and a
// replay's answer) and the write (JobSubmitMany, whose only lookup is the
// dedup probe of jobs). The tables they read are idempotency_keys and
// jobs. The key sweeper deletes keys, so idempotency_keys can be analyzed
// small after it was large: the gate closes then, as for a young table.
const keyPlanGateQuery = `SELECT count(*) = 2 AND coalesce(bool_and(c.reltuples < 0 OR c.reltuples >= $1), false)
FROM pg_catalog.pg_class c
WHERE c.oid IN (to_regclass('jobs'), to_regclass('idempotency_keys'))`

// planGate says whether the hot statements may run as named prepared
// statements now. query is planGateQuery or keyPlanGateQuery.
type planGate struct {
	query    string
	open     atomic.Bool
	checkAt  atomic.Int64 // unix nanoseconds after which the next use checks
	checking atomic.Bool
}

// mode is the exec mode for a hot statement: named (cached plans) while
// the gate is open, unnamed (a custom plan each time) otherwise. The first
// use after planGateInterval reads the statistics on pool first.
func (g *planGate) mode(ctx context.Context, pool dbsqlc.DBTX, checked *testsignal.Signal[bool]) pgx.QueryExecMode {
	if now := time.Now().UnixNano(); now >= g.checkAt.Load() && g.checking.CompareAndSwap(false, true) {
		var open bool
		if err := pool.QueryRow(ctx, g.query, pgx.QueryExecModeCacheDescribe, planGateRows).Scan(&open); err == nil {
			g.open.Store(open)
			g.checkAt.Store(now + int64(planGateInterval))
			checked.Signal(open)
		}
		g.checking.Store(false)
	}
	if g.open.Load() {
		return pgx.QueryExecModeCacheStatement
	}
	return pgx.QueryExecModeCacheDescribe
}

// hot is the pool for one of the engine's per-job statements (the
// allowlist: JobClaim, DocumentGetMany, CheckpointListMany,
// CheckpointGetByStageKeys, CheckpointGetByOneStageKey,
// CheckpointWriteMany, JobPublishMany, JobHeartbeatMany,
// ProviderLimitDraw, JobEventNotify).
func (s *Store) hot(ctx context.Context) dbsqlc.DBTX {
	return execMode{db: s.pool, mode: s.plans.mode(ctx, s.pool, &s.signals.PlansChecked)}
}

// gated is the pool for submitting's statements (the key read, newReads'
// keyDB, and JobSubmitMany): they run named while keyPlans is open,
// unnamed otherwise.
type gated struct{ s *Store }

func (g gated) db(ctx context.Context) execMode {
	return execMode{db: g.s.pool, mode: g.s.keyPlans.mode(ctx, g.s.pool, &g.s.signals.KeyPlansChecked)}
}

func (g gated) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return g.db(ctx).Exec(ctx, sql, args...)
}

func (g gated) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return g.db(ctx).Query(ctx, sql, args...)
}

func (g gated) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return g.db(ctx).QueryRow(ctx, sql, args...)
}

// execMode runs db's statements in mode, pgx's per-query option.
type execMode struct {
	db   dbsqlc.DBTX
	mode pgx.QueryExecMode
}

func (e execMode) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return e.db.Exec(ctx, sql, append([]any{e.mode}, args...)...)
}

func (e execMode) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return e.db.Query(ctx, sql, append([]any{e.mode}, args...)...)
}

func (e execMode) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return e.db.QueryRow(ctx, sql, append([]any{e.mode}, args...)...)
}
