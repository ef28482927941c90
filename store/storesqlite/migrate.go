package storesqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/oncejob/oncejob/migrations"
)

// The statements of the migrator itself are its bootstrap, not queries of the
// store (sqlc reads the schema the migrations make), so they stay here rather
// than in dbsqlite.
const (
	sqlMigrateTableExists = `SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations')`
	sqlMigrateCreateTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at INTEGER NOT NULL -- unix microseconds
) STRICT`
	sqlMigrateApplied = `SELECT version FROM schema_migrations ORDER BY version`
	sqlMigrateRecord  = `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`
)

// migrate applies the pending SQLite migrations (migrations.Run), each in
// its own write transaction with its schema_migrations row, so a re-run is a
// no-op and a failed migration leaves nothing half applied. The data
// directory's lock keeps other processes out, and db is the single writer.
// A data directory migrated by a newer binary is refused.
func migrate(ctx context.Context, db *sql.DB) error {
	all, err := migrations.SQLite()
	if err != nil {
		return err
	}
	if _, err := migrations.Run(ctx, writerMigrator{db}, all); err != nil {
		return fmt.Errorf("storesqlite: %w", err)
	}
	return nil
}

// writerMigrator implements migrations.Driver on the write connection: a
// write transaction (BEGIN IMMEDIATE) is the migration lock.
type writerMigrator struct{ db *sql.DB }

func (m writerMigrator) MigrationTx(ctx context.Context, fn func(tx migrations.Tx) error) error {
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if err := fn(migrationTx{tx}); err != nil {
		return err
	}
	return tx.Commit()
}

// migrationTx implements migrations.Tx.
type migrationTx struct{ tx *sql.Tx }

func (t migrationTx) MigrationApplied(ctx context.Context) ([]int, error) {
	var exists bool
	if err := t.tx.QueryRowContext(ctx, sqlMigrateTableExists).Scan(&exists); err != nil || !exists {
		return nil, err
	}
	rows, err := t.tx.QueryContext(ctx, sqlMigrateApplied)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	var versions []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		versions = append(versions, v)
	}
	return versions, rows.Err()
}

func (t migrationTx) MigrationApply(ctx context.Context, m migrations.Migration) error {
	if _, err := t.tx.ExecContext(ctx, sqlMigrateCreateTable); err != nil {
		return err
	}
	// Without arguments, the driver runs every statement of the file.
	if _, err := t.tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	_, err := t.tx.ExecContext(ctx, sqlMigrateRecord, m.Version, time.Now().UnixMicro())
	return err
}
