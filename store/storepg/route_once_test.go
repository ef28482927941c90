package storepg_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// TestConcurrentRoutingsRouteAnEventOnce: routings racing over a backlog
// (small pages, one partition's lock passed from one to the next as they
// commit) route every event once. A routing reads its events after it
// holds their partition: read in a snapshot older than its lock, events
// that the partition's previous holder routed and committed meanwhile
// looked unrouted, and were routed - and, at routing, sent - again (docs/
// architecture.md, "Routing and deliveries").
func TestConcurrentRoutingsRouteAnEventOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	config, err := pgxpool.ParseConfig(storepgtest.NewSchemaURL(t))
	require.NoError(t, err)
	const routers = 4
	config.MaxConns = routers
	pool, err := pgxpool.NewWithConfig(ctx, config)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, storepg.Migrate(ctx, pool))
	// 3 jobs (a partition or three) of 200 events each: every routing
	// contends for the same few partitions.
	const jobs, perJob = 3, 200
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `WITH jobs AS (SELECT g, gen_random_uuid() AS id FROM generate_series(1, $1::int) g),
			ev AS (INSERT INTO outbox (event_id, tenant, job_id, event_type, payload)
				SELECT 'job' || g || '-' || n, 'acme', id, 'job.succeeded', '{}'
				FROM jobs, generate_series(1, $2::int) n ORDER BY n, g
				RETURNING id, job_id)
			INSERT INTO outbox_unrouted (id, job_id) SELECT id, job_id FROM ev`, jobs, perJob)
		return err
	}))
	st := storepg.New(pool)

	var mu sync.Mutex
	routed := map[string]int{}
	route := func(e *store.OutboxEvent) []string {
		mu.Lock()
		routed[e.EventID]++
		mu.Unlock()
		return []string{"hook"}
	}
	var wg sync.WaitGroup
	for range routers {
		wg.Go(func() {
			for idle := 0; idle < 20; {
				n, err := st.OutboxRoute(ctx, &store.OutboxRouteParams{Limit: 2, Route: route})
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					idle++
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, routed, jobs*perJob, "every event routed")
	for id, n := range routed {
		require.Equal(t, 1, n, "event %s routed %d times", id, n)
	}
	var writes int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM deliveries`).Scan(&writes))
	require.Equal(t, jobs*perJob, writes)
}
