package storepg_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// TestPingWithEveryPoolConnectionTaken (issue #31): readiness must not
// depend on a free connection of the store's pool. With every connection
// held (one tenant's slow pages), Ping and PingWrite still answer, on the
// probe's own connection; on the pool they waited until their deadline,
// and /readyz answered 503 while the database answered.
func TestPingWithEveryPoolConnectionTaken(t *testing.T) {
	t.Parallel()
	st := storepgtest.NewTestStore(t)
	pool := st.Pool()
	require.Equal(t, int(pool.Config().MaxConns), st.Connections())

	held := make([]*pgxpool.Conn, st.Connections())
	for i := range held {
		c, err := pool.Acquire(t.Context())
		require.NoError(t, err)
		held[i] = c
	}
	require.Equal(t, pool.Config().MaxConns, pool.Stat().AcquiredConns(), "every connection is taken")
	// The deadline bounds the old code's wait for a connection; it is not
	// a timing assertion.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, st.Ping(ctx), "Ping with every pool connection taken")
	require.NoError(t, st.PingWrite(ctx), "PingWrite with every pool connection taken")
	for _, c := range held {
		c.Release()
	}
}
