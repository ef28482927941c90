package storepg_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// TestDeliveryClaimPlanIgnoresStaleStatistics: deliveries analyzed while
// empty, then filled with 20,000 pending deliveries (a fresh deployment, a
// backlog routed before autovacuum analyzes again): a claim of 100 still
// walks deliveries_due_idx - the planner's statistics, which say the table
// is empty, would have it read every pending delivery and sort them - and
// reads no table sequentially.
func TestDeliveryClaimPlanIgnoresStaleStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schemaURL, schema, pool := migratedSchema(t)
	_, err := pool.Exec(ctx, `ANALYZE deliveries`)
	require.NoError(t, err)
	// Events of 20,000 jobs that do not exist: no foreign key is checked.
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO outbox (event_id, tenant, job_id, event_type, payload, routed_at)
			SELECT 'e' || g, 'acme', gen_random_uuid(), 'job.succeeded', '{}', now() FROM generate_series(1, 20000) g`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO deliveries (outbox_id, event_id, event_type, sink, tenant, job_id, due_at)
			SELECT id, event_id, event_type, 'hook', tenant, job_id, now() - interval '1 minute' FROM outbox`)
		return err
	}))

	admin, err := pgx.Connect(ctx, storepgtest.DatabaseURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	scans := func() (due, seq int64) {
		require.NoError(t, admin.QueryRow(ctx, `SELECT
			(SELECT coalesce(idx_scan, 0) FROM pg_stat_user_indexes WHERE schemaname = $1 AND indexrelname = 'deliveries_due_idx'),
			(SELECT coalesce(seq_scan, 0) FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'deliveries')`, schema).Scan(&due, &seq))
		return due, seq
	}
	// The counts are read once every backend of the schema has exited
	// (storepgtest.WaitIdle): the migration's seven index builds count as
	// sequential scans of deliveries.
	pool.Close()
	storepgtest.WaitIdle(t, schema)
	dueBefore, seqBefore := scans()

	pool, err = pgxpool.New(ctx, schemaURL)
	require.NoError(t, err)
	started := time.Now()
	ds, err := storepg.New(pool).DeliveryClaim(ctx, &store.DeliveryClaimParams{Owner: "r", Sinks: []string{"hook"}, Limit: 100, LeaseDuration: time.Minute})
	took := time.Since(started)
	require.NoError(t, err)
	require.Len(t, ds, 100)
	pool.Close()
	storepgtest.WaitIdle(t, schema)
	dueAfter, seqAfter := scans()
	t.Logf("claim of 100 among 20,000 pending, statistics of an empty table: %s", took)
	require.Greater(t, dueAfter, dueBefore, "the claim walked deliveries_due_idx")
	require.Equal(t, seqBefore, seqAfter, "the claim read deliveries sequentially")
}
