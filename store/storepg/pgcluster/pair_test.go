package pgcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store/storepg/pgcluster"
)

// TestFailoverPair kills the primary of a synchronous pair and promotes the
// standby: every committed row is on the new primary, the multi-host URL
// reaches it and writes there, and nothing answers on the old primary.
func TestFailoverPair(t *testing.T) {
	p := pgcluster.PairForTest(t, pgcluster.Synchronous)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.URL("postgres"))
	require.NoError(t, err)
	require.Equal(t, p.Primary.Addr(), addrOf(conn), "the URL reaches the primary first")
	_, err = conn.Exec(ctx, "CREATE TABLE t (n int)")
	require.NoError(t, err)
	for n := range 100 {
		_, err = conn.Exec(ctx, "INSERT INTO t VALUES ($1)", n)
		require.NoError(t, err)
	}
	// A standby refuses writes, so the URL skips it while the primary
	// lives. (A write that names no table of the primary's: a synchronous
	// commit waits for the standby's flush, not its replay, so t may not
	// exist there yet, and an INSERT into it fails on that first.)
	sconn, err := pgx.Connect(ctx, p.Standby.URL("postgres"))
	require.NoError(t, err)
	_, err = sconn.Exec(ctx, "CREATE TABLE refused (n int)")
	require.ErrorContains(t, err, "read-only")
	require.NoError(t, sconn.Close(ctx))

	_, err = p.Primary.Kill(ctx)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "INSERT INTO t VALUES (-2)")
	require.Error(t, err, "the killed primary's connection is dead")
	cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = pgx.Connect(cctx, p.URL("postgres"))
	ccancel()
	require.Error(t, err, "before the promotion no server accepts writes")

	require.NoError(t, p.Standby.Promote(ctx))
	conn, err = pgx.Connect(ctx, p.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.Equal(t, p.Standby.Addr(), addrOf(conn), "the URL follows the promotion")
	var count, sum int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*), sum(n) FROM t").Scan(&count, &sum))
	require.Equal(t, 100, count, "a synchronous standby has every acknowledged commit")
	require.Equal(t, 99*100/2, sum)
	_, err = conn.Exec(ctx, "INSERT INTO t VALUES (100)")
	require.NoError(t, err)
}

func addrOf(conn *pgx.Conn) string {
	cfg := conn.PgConn().Conn().RemoteAddr()
	return cfg.String()
}
