package storepg_test

import (
	"context"
	"sync"
	"testing"
	"time"

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

	t.Run("SchemasDoNotWaitForEachOther", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		a, b := storepgtest.NewTestPool(t), storepgtest.NewTestPool(t)
		// Schema a's migration lock, held by a transaction of the test.
		tx, err := a.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		var pid int
		require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
		_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(current_schema(), $1))`, int64(0x6f6e63656a6f62))
		require.NoError(t, err)

		// a's migration waits for that lock...
		migratedA := make(chan error, 1)
		go func() { migratedA <- storepg.Migrate(ctx, a) }()
		require.Eventually(t, func() bool {
			var waiting bool
			err := b.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_locks h
				ON h.locktype = 'advisory' AND h.pid = $1 AND h.granted
				AND l.classid = h.classid AND l.objid = h.objid AND l.objsubid = h.objsubid
				WHERE l.locktype = 'advisory' AND NOT l.granted)`, pid).Scan(&waiting)
			return err == nil && waiting
		}, 30*time.Second, 20*time.Millisecond, "schema a's migration waits for its schema's lock")
		// ...while b's goes on.
		other, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		require.NoError(t, storepg.Migrate(other, b), "a migration of another schema waited")
		select {
		case err := <-migratedA:
			t.Fatalf("schema a migrated under its held lock: %v", err)
		default:
		}
		require.NoError(t, tx.Rollback(ctx))
		require.NoError(t, <-migratedA)
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
