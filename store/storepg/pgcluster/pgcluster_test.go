package pgcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store/storepg/pgcluster"
)

// TestRestartKeepsCommittedRows restarts the cluster both ways; what was
// committed before survives, and the server takes connections again.
func TestRestartKeepsCommittedRows(t *testing.T) {
	c := pgcluster.ForTest(t)
	ctx := context.Background()
	exec := func(sql string) {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		require.NoError(t, err)
	}
	count := func() int {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		require.NoError(t, err)
		defer conn.Close(ctx)
		var n int
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n))
		return n
	}
	exec("CREATE TABLE t (n int); INSERT INTO t VALUES (1)")
	for i, mode := range []pgcluster.ShutdownMode{pgcluster.Fast, pgcluster.Immediate} {
		require.NoError(t, c.Stop(ctx, mode))
		_, err := pgx.Connect(ctx, c.URL("postgres"))
		require.Error(t, err, "the server is down")
		require.NoError(t, c.Start(ctx))
		require.Equal(t, i+1, count())
		exec("INSERT INTO t VALUES (2)")
	}
	require.NoError(t, c.Restart(ctx, pgcluster.Immediate, 10*time.Millisecond))
	require.Equal(t, 3, count())
}
