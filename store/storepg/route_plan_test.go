package storepg_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// TestRoutingKeepsTheQueuesKeyOnStaleStatistics: the routing queue analyzed
// while empty, then eight routings on one connection - past the fifth, the
// routing's write (a named statement) runs the generic plan Postgres keeps
// for the connection, and is not planned again - each route their events,
// and none reads the queue sequentially: the plan the statistics of an
// empty table would choose.
func TestRoutingKeepsTheQueuesKeyOnStaleStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schemaURL, schema, pool := migratedSchema(t)
	_, err := pool.Exec(ctx, `ANALYZE outbox_unrouted`)
	require.NoError(t, err)
	pool.Close()

	admin, err := pgx.Connect(ctx, storepgtest.DatabaseURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	scans := func() (key, seq int64) {
		require.NoError(t, admin.QueryRow(ctx, `SELECT
			(SELECT coalesce(idx_scan, 0) FROM pg_stat_user_indexes WHERE schemaname = $1 AND indexrelname = 'outbox_unrouted_pkey'),
			(SELECT coalesce(seq_scan, 0) FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'outbox_unrouted')`, schema).Scan(&key, &seq))
		return key, seq
	}
	storepgtest.WaitIdle(t, schema) // the counts of the migration's backends are in
	keyBefore, seqBefore := scans()

	// The store as Open makes it (its statements unnamed unless named), on
	// one connection: every routing on it, and its named statements with it.
	st, err := storepg.Open(ctx, schemaURL+"&pool_max_conns=1")
	require.NoError(t, err)
	pool = st.Pool()
	for round := range 8 {
		// 200 events of jobs that do not exist: no trigger, no foreign key.
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `WITH e AS (
					INSERT INTO outbox (event_id, tenant, job_id, event_type, payload)
					SELECT 'e' || $1::int || '-' || g, 'acme', gen_random_uuid(), 'job.succeeded', '{}' FROM generate_series(1, 200) g
					RETURNING id, job_id)
				INSERT INTO outbox_unrouted (id, job_id) SELECT id, job_id FROM e`, round)
			return err
		}))
		routed := 0
		for {
			n, err := st.OutboxRoute(ctx, &store.OutboxRouteParams{Route: func(*store.OutboxEvent) []string { return nil }, Limit: 500})
			require.NoError(t, err)
			if n == 0 {
				break
			}
			routed += n
		}
		require.Equal(t, 200, routed, "round %d", round)
	}
	// The write, a named statement on the routings' connection, runs its
	// generic plan: it is not planned at each routing.
	var generic, custom int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
		FROM pg_prepared_statements WHERE statement LIKE '%INSERT INTO deliveries%'`).Scan(&generic, &custom))
	require.Positive(t, generic, "generic plans of the routing's write (custom: %d)", custom)
	st.Close()
	storepgtest.WaitIdle(t, schema)
	keyAfter, seqAfter := scans()
	require.Greater(t, keyAfter, keyBefore, "the routings read the queue by its key")
	require.Equal(t, seqBefore, seqAfter, "a routing read the queue sequentially")
	var left int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "outbox_unrouted"}.Sanitize()).Scan(&left))
	require.Zero(t, left, "every event left the routing queue")
}
