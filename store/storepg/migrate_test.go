package storepg_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/migrations"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

func TestMigrate(t *testing.T) {
	t.Parallel()

	t.Run("ConcurrentCallsAndReRunsApplyEachMigrationOnce", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		pool := storepgtest.NewTestPool(t)

		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { errs[i] = storepg.Migrate(ctx, pool) })
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.NoError(t, storepg.Migrate(ctx, pool))

		all, err := migrations.Postgres()
		require.NoError(t, err)
		var applied, latest int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), max(version) FROM schema_migrations`).Scan(&applied, &latest))
		require.Equal(t, len(all), applied)
		require.Equal(t, all[len(all)-1].Version, latest)
		require.NoError(t, storepg.New(pool).MigrationValidate(ctx))
	})

	t.Run("ValidateNamesWhatIsMissing", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		st := storepg.New(storepgtest.NewTestPool(t))
		all, err := migrations.Postgres()
		require.NoError(t, err)

		var schemaErr *migrations.SchemaError
		require.ErrorAs(t, st.MigrationValidate(ctx), &schemaErr)
		require.Equal(t, all, schemaErr.Missing, "a database never migrated misses every migration")

		applied, err := migrations.Run(ctx, st, all[:2])
		require.NoError(t, err)
		require.Equal(t, all[:2], applied)
		require.ErrorAs(t, st.MigrationValidate(ctx), &schemaErr)
		require.Equal(t, all[2:], schemaErr.Missing)
		require.Empty(t, schemaErr.Unknown)
	})
}
