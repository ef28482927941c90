package storesqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/oncejob/oncejob/migrations"
)

// The statements of the migrator itself are its bootstrap, not queries of the
// store, so they stay here rather than in dbsqlite.
const (
	sqlMigrateCreateTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at INTEGER NOT NULL -- unix microseconds
) STRICT`
	sqlMigrateApplied = `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = ?)`
	sqlMigrateRecord  = `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`
)

// migrate applies the pending SQLite migrations in version order, each in
// its own write transaction with its schema_migrations row, so a re-run is a
// no-op and a failed migration leaves nothing half applied. The data
// directory's lock keeps other processes out, and db is the single writer.
func migrate(ctx context.Context, db *sql.DB) error {
	all, err := migrations.SQLite()
	if err != nil {
		return err
	}
	for _, m := range all {
		if err := migrateOne(ctx, db, m); err != nil {
			return fmt.Errorf("storesqlite: migrate %s: %w", m.Name, err)
		}
	}
	return nil
}

func migrateOne(ctx context.Context, db *sql.DB, m migrations.Migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, sqlMigrateCreateTable); err != nil {
		return err
	}
	var applied bool
	if err := tx.QueryRowContext(ctx, sqlMigrateApplied, m.Version).Scan(&applied); err != nil {
		return err
	}
	if applied {
		return nil
	}
	// Without arguments, the driver runs every statement of the file.
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, sqlMigrateRecord, m.Version, time.Now().UnixMicro()); err != nil {
		return err
	}
	return tx.Commit()
}
