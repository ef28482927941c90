package storepg_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
)

// TestRoutingsOfOtherJobsRunAtOnce: while one routing is held inside its
// transaction, another routes events - of other jobs only: the outbox is
// partitioned by job, one routing at a time per partition (docs/
// architecture.md, "Routing and deliveries"). Every event is routed once,
// each job's events in the order they were written, and every delivery is
// written.
func TestRoutingsOfOtherJobsRunAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, pool := migratedSchema(t)
	t.Cleanup(pool.Close)
	// Two events of each of 40 jobs (that do not exist: no foreign key is
	// checked), all first events before the second ones.
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `WITH jobs AS (SELECT g, gen_random_uuid() AS id FROM generate_series(1, 40) g),
			ev AS (INSERT INTO outbox (event_id, tenant, job_id, event_type, payload)
				SELECT 'job' || g || '-' || n, 'acme', id, 'job.succeeded', '{}'
				FROM jobs, generate_series(1, 2) n ORDER BY n, g
				RETURNING id, job_id)
			INSERT INTO outbox_unrouted (id, job_id) SELECT id, job_id FROM ev`)
		return err
	}))
	st := storepg.New(pool)

	var mu sync.Mutex
	jobsOf := map[string]map[string]bool{} // routing -> the jobs whose events it routed
	order := map[string][]string{}         // job -> its events, in routing order
	route := func(name string, held func()) func(*store.OutboxEvent) []string {
		jobsOf[name] = map[string]bool{}
		return func(e *store.OutboxEvent) []string {
			mu.Lock()
			jobsOf[name][e.JobID] = true
			order[e.JobID] = append(order[e.JobID], e.EventID)
			mu.Unlock()
			held()
			return []string{"hook", "stream"}
		}
	}
	inA, release := make(chan struct{}), make(chan struct{})
	releaseA := sync.OnceFunc(func() { close(release) })
	defer releaseA() // a failing test does not leave the first routing held
	var once sync.Once
	type routed struct {
		n   int
		err error
	}
	aDone := make(chan routed, 1)
	go func() {
		n, err := st.OutboxRoute(ctx, &store.OutboxRouteParams{Limit: 20, Route: route("a", func() {
			once.Do(func() { close(inA); <-release })
		})})
		aDone <- routed{n, err}
	}()
	<-inA
	b, err := st.OutboxRoute(ctx, &store.OutboxRouteParams{Limit: 20, Route: route("b", func() {})})
	require.NoError(t, err)
	require.Positive(t, b, "a second routing routes while the first is held")
	releaseA()
	ra := <-aDone
	require.NoError(t, ra.err)
	a := ra.n
	require.Positive(t, a)
	for job := range jobsOf["a"] {
		require.False(t, jobsOf["b"][job], "job %s routed by both routings at once", job)
	}

	total := a + b
	for {
		n, err := st.OutboxRoute(ctx, &store.OutboxRouteParams{Route: route("later", func() {})})
		require.NoError(t, err)
		if n == 0 {
			break
		}
		total += n
	}
	require.Equal(t, 80, total, "every event routed once")
	require.Len(t, order, 40)
	for job, events := range order {
		require.Len(t, events, 2, "job %s", job)
		require.Regexp(t, `-1$`, events[0], "job %s: its first event first", job)
	}
	var deliveries int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM deliveries`).Scan(&deliveries))
	require.Equal(t, 160, deliveries)
}

// TestASecondRoutingLooksPastTheFirstsPage: the oldest page of unrouted
// events is all of one partition, held by a routing inside its
// transaction (its events unrouted until it commits); a second routing
// routes the events of other partitions after that page, rather than find
// nothing to route until the first commits.
func TestASecondRoutingLooksPastTheFirstsPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, _, pool := migratedSchema(t)
	t.Cleanup(pool.Close)
	// 20 events of jobs of partition 0, then 20 of jobs of the others (jobs
	// that do not exist: no foreign key is checked); the partition is
	// OutboxRouteBatch's hash of the job id.
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `WITH ids AS (SELECT gen_random_uuid() AS id FROM generate_series(1, 2000)),
			jobs AS (
				(SELECT id, 0 AS k FROM ids WHERE hashtext(id::text) & 7 = 0 LIMIT 20)
				UNION ALL
				(SELECT id, 1 FROM ids WHERE hashtext(id::text) & 7 <> 0 LIMIT 20)),
			ev AS (INSERT INTO outbox (event_id, tenant, job_id, event_type, payload)
				SELECT 'job-' || id, 'acme', id, 'job.succeeded', '{}' FROM jobs ORDER BY k
				RETURNING id, job_id)
			INSERT INTO outbox_unrouted (id, job_id) SELECT id, job_id FROM ev`)
		return err
	}))
	st := storepg.New(pool)
	inA, release := make(chan struct{}), make(chan struct{})
	releaseA := sync.OnceFunc(func() { close(release) })
	defer releaseA() // a failing test does not leave the first routing held
	var once sync.Once
	aDone := make(chan error, 1)
	go func() {
		_, err := st.OutboxRoute(ctx, &store.OutboxRouteParams{Limit: 20, Route: func(*store.OutboxEvent) []string {
			once.Do(func() { close(inA); <-release })
			return []string{"hook"}
		}})
		aDone <- err
	}()
	<-inA
	b, err := st.OutboxRoute(ctx, &store.OutboxRouteParams{Limit: 20, Route: func(*store.OutboxEvent) []string { return []string{"hook"} }})
	require.NoError(t, err)
	require.Equal(t, 20, b, "the second routing routes the other partitions' events")
	releaseA()
	require.NoError(t, <-aDone)
	var deliveries, unrouted int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM deliveries), (SELECT count(*) FROM outbox_unrouted)`).Scan(&deliveries, &unrouted))
	require.Equal(t, 40, deliveries, "every event routed once")
	require.Zero(t, unrouted)
}
