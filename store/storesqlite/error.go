package storesqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/oncejob/oncejob/store"
)

// computedSuccessColumns is how SQLite names a violation of the partial
// unique index jobs_computed_success_key (see
// migrations/sqlite/0001_init.up.sql): by its columns, not its name. It is
// the only unique index on jobs over these columns.
const computedSuccessColumns = "jobs.tenant, jobs.dedup_key"

// interpretError maps a driver error to a store sentinel, or wraps it as an
// internal error whose text is not for clients. Context errors stay
// detectable with errors.Is.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	var sqliteErr *sqlite.Error
	if errors.As(err, &sqliteErr) && sqliteErr.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE &&
		strings.Contains(sqliteErr.Error(), computedSuccessColumns) {
		return store.ErrDuplicateComputation
	}
	if errors.As(err, &sqliteErr) && isValueError(sqliteErr) {
		return fmt.Errorf("storesqlite: %w: %s", store.ErrInvalidRow, sqliteErr.Error())
	}
	return fmt.Errorf("storesqlite: %w", err)
}

// isValueError reports whether SQLite refused a statement for a value it
// was given, so the same statement fails again: a string or blob over its
// length limit, a datatype mismatch, a NOT NULL or CHECK violation (such
// as json_valid).
func isValueError(e *sqlite.Error) bool {
	switch e.Code() {
	case sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_CONSTRAINT_NOTNULL, sqlite3.SQLITE_CONSTRAINT_CHECK:
		return true
	}
	return false
}

// interpretLeaseError is interpretError for fenced statements, whose "no
// row" means the fence held the write back.
func interpretLeaseError(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrLeaseLost
	}
	return interpretError(err)
}
