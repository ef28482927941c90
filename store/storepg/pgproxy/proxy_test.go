package pgproxy_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncejob/oncejob/store/storepg/pgcluster"
	"github.com/oncejob/oncejob/store/storepg/pgproxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A statement as sqlc writes it: the proxy finds it by its name.
const insertRow = "-- name: RowInsert :exec\nINSERT INTO t (n) VALUES ($1)"

type bundle struct {
	cluster *pgcluster.Cluster
	proxy   *pgproxy.Proxy
}

// count reads the table directly, not through the proxy.
func (b *bundle) count(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, b.cluster.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n))
	return n
}

// connect opens a connection through the proxy.
func (b *bundle) connect(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), pgcluster.URL(b.proxy.Addr(), "postgres"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// setup shares one cluster between the subtests: each gets a proxy and an
// empty table.
func setup(t *testing.T) func(t *testing.T) *bundle {
	c := pgcluster.ForTest(t)
	return func(t *testing.T) *bundle {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "DROP TABLE IF EXISTS t; CREATE TABLE t (n int PRIMARY KEY)")
		require.NoError(t, err)
		require.NoError(t, conn.Close(ctx))
		p, err := pgproxy.Start(c.Addr())
		require.NoError(t, err)
		t.Cleanup(p.Close)
		return &bundle{cluster: c, proxy: p}
	}
}

func fired(t *testing.T, in *pgproxy.Injection) {
	t.Helper()
	select {
	case <-in.Fired():
	case <-time.After(10 * time.Second):
		t.Fatal("the fault never fired")
	}
}

// released waits for a stalled call that in.Release let go: well before
// the stall's own minute ends.
func released(t *testing.T, in *pgproxy.Injection, done <-chan error) {
	t.Helper()
	in.Release()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Release did not end the stall")
	}
}

// stalledFor is a stall's Duration in the tests: longer than any of them
// takes to look at what the stall holds, so a slow machine cannot see the
// stall end first; each test releases its stall when it has looked.
const stalledFor = time.Minute

func TestProxy(t *testing.T) {
	newBundle := setup(t)
	ctx := context.Background()

	t.Run("ForwardsAndCutsAll", func(t *testing.T) {
		b := newBundle(t)
		conn := b.connect(t)
		_, err := conn.Exec(ctx, insertRow, 1) // prepared, then bound by name
		require.NoError(t, err)
		_, err = conn.Exec(ctx, insertRow, 2)
		require.NoError(t, err)
		require.Equal(t, 1, b.proxy.CutAll())
		_, err = conn.Exec(ctx, insertRow, 3)
		require.Error(t, err, "a cut connection fails")
		_, err = b.connect(t).Exec(ctx, insertRow, 3)
		require.NoError(t, err, "a new connection works")
		require.Equal(t, 3, b.count(t))
	})

	t.Run("Refuse", func(t *testing.T) {
		b := newBundle(t)
		b.proxy.Refuse(true)
		_, err := pgx.Connect(ctx, pgcluster.URL(b.proxy.Addr(), "postgres"))
		require.Error(t, err)
		b.proxy.Refuse(false)
		b.connect(t)
	})

	t.Run("CutBefore", func(t *testing.T) {
		b := newBundle(t)
		conn := b.connect(t)
		_, err := conn.Exec(ctx, insertRow, 1)
		require.NoError(t, err)
		in := b.proxy.Inject(pgproxy.Fault{Statement: "RowInsert", Action: pgproxy.CutBefore})
		_, err = conn.Exec(ctx, "SELECT 1") // not the statement: untouched
		require.NoError(t, err)
		_, err = conn.Exec(ctx, insertRow, 2)
		require.Error(t, err)
		fired(t, in)
		require.Equal(t, 1, b.count(t), "the statement never ran")
		_, err = b.connect(t).Exec(ctx, insertRow, 3)
		require.NoError(t, err, "the fault acts once")
		require.Equal(t, 1, in.Count())
	})

	t.Run("CutAfter", func(t *testing.T) {
		b := newBundle(t)
		conn := b.connect(t)
		in := b.proxy.Inject(pgproxy.Fault{Statement: "RowInsert", Action: pgproxy.CutAfter})
		_, err := conn.Exec(ctx, insertRow, 1) // prepared on first use: Parse, then Bind
		require.Error(t, err, "the answer was dropped")
		fired(t, in)
		require.Equal(t, 1, b.count(t), "the statement ran and committed")
	})

	t.Run("StallCommitHoldsTheRowLock", func(t *testing.T) {
		b := newBundle(t)
		_, err := b.connect(t).Exec(ctx, insertRow, 1)
		require.NoError(t, err)
		in := b.proxy.Inject(pgproxy.Fault{Statement: "RowUpdate", Action: pgproxy.StallCommit, Duration: stalledFor})
		done := make(chan error, 1)
		go func() {
			_, err := b.connect(t).Exec(ctx, "-- name: RowUpdate :exec\nUPDATE t SET n = 10 WHERE n = $1", 1)
			done <- err
		}()
		fired(t, in)
		direct, err := pgx.Connect(ctx, b.cluster.URL("postgres"))
		require.NoError(t, err)
		defer direct.Close(ctx)
		require.Eventually(t, func() bool {
			_, err := direct.Exec(ctx, "SELECT n FROM t WHERE n = 1 FOR UPDATE NOWAIT")
			return err != nil // 55P03: the stalled statement holds the row
		}, 60*time.Second, 10*time.Millisecond)
		released(t, in, done)
		var n int
		require.NoError(t, direct.QueryRow(ctx, "SELECT n FROM t").Scan(&n))
		require.Equal(t, 10, n, "committed once the Sync went through")
	})

	t.Run("StallBeforeRunsLate", func(t *testing.T) {
		b := newBundle(t)
		in := b.proxy.Inject(pgproxy.Fault{Statement: "commit", Action: pgproxy.StallBefore, Duration: stalledFor})
		conn := b.connect(t)
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, insertRow, 1)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- tx.Commit(ctx) }()
		fired(t, in)
		require.Equal(t, 0, b.count(t), "not committed while held")
		released(t, in, done)
		require.Equal(t, 1, b.count(t))
	})

	t.Run("StallAllThenRelease", func(t *testing.T) {
		b := newBundle(t)
		conn := b.connect(t)
		release := b.proxy.Stall()
		var wg sync.WaitGroup
		var err error
		wg.Go(func() { _, err = conn.Exec(ctx, insertRow, 1) })
		time.Sleep(300 * time.Millisecond)
		require.Equal(t, 0, b.count(t), "nothing passes while stalled")
		release()
		wg.Wait()
		require.NoError(t, err, "the connection resumes where it was")
		require.Equal(t, 1, b.count(t))
	})

	t.Run("PartitionOnStatement", func(t *testing.T) {
		b := newBundle(t)
		other := b.connect(t)
		in := b.proxy.Inject(pgproxy.Fault{Statement: "RowInsert", Action: pgproxy.Partition, Duration: stalledFor})
		done := make(chan error, 1)
		go func() { _, err := b.connect(t).Exec(ctx, insertRow, 1); done <- err }()
		fired(t, in)
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := other.Exec(cctx, "SELECT 1")
		require.Error(t, err, "every connection is stalled")
		released(t, in, done)
		require.Equal(t, 1, b.count(t))
	})
}
