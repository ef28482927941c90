package receiver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultInboxTable is the inbox table's name unless one is given.
const DefaultInboxTable = "oncejob_inbox"

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// The inbox is the receiver's own table, so its statements are built here
// for the caller's table name (checked above: a plain identifier).
func inboxSQL(table, placeholder1, placeholder2 string) (create, insert, receipt, update string) {
	create = "CREATE TABLE IF NOT EXISTS " + table + " (event_id text PRIMARY KEY, receipt text NOT NULL DEFAULT '', applied_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP)"
	insert = "INSERT INTO " + table + " (event_id) VALUES (" + placeholder1 + ") ON CONFLICT DO NOTHING"
	receipt = "SELECT receipt FROM " + table + " WHERE event_id = " + placeholder1
	update = "UPDATE " + table + " SET receipt = " + placeholder2 + " WHERE event_id = " + placeholder1
	return
}

func checkTable(table string) (string, error) {
	if table == "" {
		table = DefaultInboxTable
	}
	if !tableName.MatchString(table) {
		return "", fmt.Errorf("receiver: inbox table %q: want a plain identifier", table)
	}
	return table, nil
}

// PgxInbox applies events once on Postgres through pgx. The inbox insert is
// first in the transaction: a concurrent delivery of the same event waits
// on the primary key and, once the first commits, inserts nothing and
// returns the first's receipt.
type PgxInbox struct {
	pool                            *pgxpool.Pool
	effect                          func(ctx context.Context, tx pgx.Tx, e *Event) (string, error)
	create, insert, receipt, update string
}

// NewPgxInbox returns an inbox in table (default oncejob_inbox) that runs
// effect in the transaction of the inbox row.
func NewPgxInbox(pool *pgxpool.Pool, table string, effect func(ctx context.Context, tx pgx.Tx, e *Event) (receipt string, err error)) (*PgxInbox, error) {
	table, err := checkTable(table)
	if err != nil {
		return nil, err
	}
	i := &PgxInbox{pool: pool, effect: effect}
	i.create, i.insert, i.receipt, i.update = inboxSQL(table, "$1", "$2")
	return i, nil
}

// CreateTable creates the inbox table if it does not exist.
func (i *PgxInbox) CreateTable(ctx context.Context) error {
	_, err := i.pool.Exec(ctx, i.create)
	return err
}

// Apply implements Applier.
func (i *PgxInbox) Apply(ctx context.Context, e *Event) (receipt string, applied bool, err error) {
	err = pgx.BeginFunc(ctx, i.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, i.insert, e.ID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return tx.QueryRow(ctx, i.receipt, e.ID).Scan(&receipt)
		}
		if receipt, err = i.effect(ctx, tx, e); err != nil {
			return err
		}
		applied = true
		_, err = tx.Exec(ctx, i.update, e.ID, receipt)
		return err
	})
	if err != nil {
		return "", false, err
	}
	return receipt, applied, nil
}

// SQLInbox applies events once through database/sql: Postgres ("postgres",
// $n placeholders) or SQLite ("sqlite", ? placeholders), both with INSERT
// ... ON CONFLICT DO NOTHING.
type SQLInbox struct {
	db                              *sql.DB
	effect                          func(ctx context.Context, tx *sql.Tx, e *Event) (string, error)
	create, insert, receipt, update string
}

// NewSQLInbox returns an inbox in table (default oncejob_inbox) of a
// database of dialect "postgres" or "sqlite".
func NewSQLInbox(db *sql.DB, dialect, table string, effect func(ctx context.Context, tx *sql.Tx, e *Event) (receipt string, err error)) (*SQLInbox, error) {
	table, err := checkTable(table)
	if err != nil {
		return nil, err
	}
	i := &SQLInbox{db: db, effect: effect}
	switch dialect {
	case "postgres":
		i.create, i.insert, i.receipt, i.update = inboxSQL(table, "$1", "$2")
	case "sqlite":
		i.create, i.insert, i.receipt, i.update = inboxSQL(table, "?1", "?2")
	default:
		return nil, fmt.Errorf("receiver: dialect %q: want postgres or sqlite", dialect)
	}
	return i, nil
}

// CreateTable creates the inbox table if it does not exist.
func (i *SQLInbox) CreateTable(ctx context.Context) error {
	_, err := i.db.ExecContext(ctx, i.create)
	return err
}

// Apply implements Applier.
func (i *SQLInbox) Apply(ctx context.Context, e *Event) (receipt string, applied bool, err error) {
	tx, err := i.db.BeginTx(ctx, nil)
	if err != nil {
		return "", false, err
	}
	defer tx.Rollback() // a no-op after Commit
	// The statements' only variable part is the table name, a checked
	// identifier (checkTable).
	//nolint:gosec
	res, err := tx.ExecContext(ctx, i.insert, e.ID)
	if err != nil {
		return "", false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return "", false, err
	}
	if n == 0 {
		//nolint:gosec // the table name is checked
		err := tx.QueryRowContext(ctx, i.receipt, e.ID).Scan(&receipt)
		if errors.Is(err, sql.ErrNoRows) {
			return "", false, fmt.Errorf("receiver: inbox row of %s vanished", e.ID)
		}
		return receipt, false, err
	}
	if receipt, err = i.effect(ctx, tx, e); err != nil {
		return "", false, err
	}
	//nolint:gosec // the table name is checked
	if _, err := tx.ExecContext(ctx, i.update, e.ID, receipt); err != nil {
		return "", false, err
	}
	if err := tx.Commit(); err != nil {
		return "", false, err
	}
	return receipt, true, nil
}
