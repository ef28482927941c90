package storepg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncejob/oncejob/migrations"
)

// migrateLockID is the pg_advisory_xact_lock key that serialises concurrent
// Migrate calls on one database ("oncejob" in ASCII).
const migrateLockID int64 = 0x6f6e63656a6f62

// Migrate applies the pending Postgres migrations in version order, each in
// its own transaction holding an advisory lock, so concurrent calls (many
// processes starting at once) are safe and a re-run is a no-op. Tables are
// created in the first schema of the connection's search_path.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	all, err := migrations.Postgres()
	if err != nil {
		return err
	}
	for _, m := range all {
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return migrateOne(ctx, tx, m) }); err != nil {
			return fmt.Errorf("storepg: migrate %s: %w", m.Name, err)
		}
	}
	return nil
}

// The statements of the migrator itself are its bootstrap, not queries of the
// store, so they stay here rather than in dbsqlc.
const (
	sqlMigrateLock        = `SELECT pg_advisory_xact_lock($1)`
	sqlMigrateCreateTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    integer     PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
)`
	sqlMigrateApplied = `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`
	sqlMigrateRecord  = `INSERT INTO schema_migrations (version) VALUES ($1)`
)

func migrateOne(ctx context.Context, tx pgx.Tx, m migrations.Migration) error {
	if _, err := tx.Exec(ctx, sqlMigrateLock, migrateLockID); err != nil {
		return err
	}
	// Under the lock, so two first runs do not race to create it.
	if _, err := tx.Exec(ctx, sqlMigrateCreateTable); err != nil {
		return err
	}
	var applied bool
	if err := tx.QueryRow(ctx, sqlMigrateApplied, m.Version).Scan(&applied); err != nil {
		return err
	}
	if applied {
		return nil
	}
	// No arguments: pgx sends it on the simple protocol, which runs a file
	// of many statements.
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, sqlMigrateRecord, m.Version)
	return err
}
