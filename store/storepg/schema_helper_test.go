package storepg_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// migratedSchema is a schema of the test's own, migrated: its URL, its
// name (for pg_stat_user_tables and storepgtest.WaitIdle), and the pool
// that migrated it, which the caller closes. The plan tests start from it
// and shape the tables' statistics before any store uses them.
func migratedSchema(t *testing.T) (schemaURL, schema string, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	schemaURL = storepgtest.NewSchemaURL(t)
	u, err := url.Parse(schemaURL)
	require.NoError(t, err)
	pool, err = pgxpool.New(ctx, schemaURL)
	require.NoError(t, err)
	if err := storepg.Migrate(ctx, pool); err != nil {
		pool.Close()
		require.NoError(t, err)
	}
	return schemaURL, u.Query().Get("search_path"), pool
}
