package storepg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncejob/oncejob/migrations"
)

// migrateLockID seeds the pg_advisory_xact_lock key that serialises
// migration transactions on one schema ("oncejob" in ASCII). The key is a
// hash of the schema's name with this seed: deployments (and tests) in
// other schemas of the same database migrate at the same time, since their
// tables are apart; two processes migrating one schema take turns.
const migrateLockID int64 = 0x6f6e63656a6f62

// Migrate applies the pending Postgres migrations (migrations.Run), each in
// its own transaction under an advisory lock of the schema, so concurrent
// calls are safe and a re-run is a no-op. Tables are created in the first schema of the
// connection's search_path.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	all, err := migrations.Postgres()
	if err != nil {
		return err
	}
	if _, err := migrations.Run(ctx, poolMigrator{pool}, all); err != nil {
		return fmt.Errorf("storepg: %w", err)
	}
	return nil
}

// MigrationValidate checks that the database has applied exactly this
// binary's migrations (migrations.Validate): a *migrations.SchemaError names
// what is missing or unknown.
func (s *Store) MigrationValidate(ctx context.Context) error {
	all, err := migrations.Postgres()
	if err != nil {
		return err
	}
	return migrations.Validate(ctx, s, all)
}

// MigrationTx implements migrations.Driver.
func (s *Store) MigrationTx(ctx context.Context, fn func(tx migrations.Tx) error) error {
	return poolMigrator{s.pool}.MigrationTx(ctx, fn)
}

// poolMigrator implements migrations.Driver on a pool.
type poolMigrator struct{ pool *pgxpool.Pool }

func (m poolMigrator) MigrationTx(ctx context.Context, fn func(tx migrations.Tx) error) error {
	return pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlMigrateLock, migrateLockID); err != nil {
			return err
		}
		return fn(migrationTx{tx})
	})
}

// The statements of the migrator itself are its bootstrap, not queries of the
// store (sqlc reads the schema the migrations make), so they stay here rather
// than in dbsqlc.
const (
	sqlMigrateLock        = `SELECT pg_advisory_xact_lock(hashtextextended(current_schema(), $1))`
	sqlMigrateTableExists = `SELECT to_regclass('schema_migrations') IS NOT NULL`
	sqlMigrateCreateTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    integer     PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
)`
	sqlMigrateApplied = `SELECT version FROM schema_migrations ORDER BY version`
	sqlMigrateRecord  = `INSERT INTO schema_migrations (version) VALUES ($1)`
)

// migrationTx implements migrations.Tx.
type migrationTx struct{ tx pgx.Tx }

func (t migrationTx) MigrationApplied(ctx context.Context) ([]int, error) {
	var exists bool
	if err := t.tx.QueryRow(ctx, sqlMigrateTableExists).Scan(&exists); err != nil || !exists {
		return nil, err
	}
	rows, err := t.tx.Query(ctx, sqlMigrateApplied)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

func (t migrationTx) MigrationApply(ctx context.Context, m migrations.Migration) error {
	if _, err := t.tx.Exec(ctx, sqlMigrateCreateTable); err != nil {
		return err
	}
	// No arguments: pgx sends it on the simple protocol, which runs a file
	// of many statements.
	if _, err := t.tx.Exec(ctx, m.SQL); err != nil {
		return err
	}
	_, err := t.tx.Exec(ctx, sqlMigrateRecord, m.Version)
	return err
}
