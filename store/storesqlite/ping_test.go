package storesqlite

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPingWithEveryReadConnectionTaken (issue #31): readiness must not
// depend on a free read connection. With every connection of the read
// pool held (one tenant's pages), Ping still answers; on the read pool it
// waited for a connection until its deadline, and /readyz answered 503.
func TestPingWithEveryReadConnectionTaken(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), Config{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	require.Equal(t, s.read.Stats().MaxOpenConnections, s.Connections())

	held := make([]*sql.Conn, s.Connections())
	for i := range held {
		held[i], err = s.read.Conn(t.Context())
		require.NoError(t, err)
	}
	require.Equal(t, s.Connections(), s.read.Stats().InUse, "every read connection is taken")
	// The deadline bounds the old code's wait for a connection; it is not
	// a timing assertion.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.Ping(ctx), "Ping with every read connection taken")
	for _, c := range held {
		require.NoError(t, c.Close())
	}
}
