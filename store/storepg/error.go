package storepg

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncejob/oncejob/store"
)

// SQLSTATEs the store acts on.
const (
	pgUniqueViolation      = "23505"
	pgDeadlockDetected     = "40P01"
	pgSerializationFailure = "40001"
)

// constraintComputedSuccess is the partial unique index allowing one computed
// success per (tenant, dedup_key); see migrations/postgres/0001_init.up.sql.
const constraintComputedSuccess = "jobs_computed_success_key"

// abortedToBreak reports whether Postgres aborted err's statement or
// transaction to break a deadlock or a serialization conflict: it wrote
// nothing, and running it again is safe.
func abortedToBreak(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == pgDeadlockDetected || pgErr.Code == pgSerializationFailure)
}

// againIfAborted runs f, and again (up to jobSubmitAttempts times in all)
// while Postgres aborts it to break a deadlock or a serialization
// conflict: an aborted statement or transaction wrote nothing.
func againIfAborted(f func() error) error {
	var err error
	for range jobSubmitAttempts {
		if err = f(); !abortedToBreak(err) {
			return err
		}
	}
	return err
}

// interpretError maps a driver error to a store sentinel, or wraps it as an
// internal error whose text is not for clients. Context errors stay
// detectable with errors.Is.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgUniqueViolation && pgErr.ConstraintName == constraintComputedSuccess {
		return store.ErrDuplicateComputation
	}
	if errors.As(err, &pgErr) && isValueError(pgErr) {
		return fmt.Errorf("storepg: %w: %s (SQLSTATE %s)", store.ErrInvalidRow, pgErr.Message, pgErr.Code)
	}
	if unavailable(err) {
		return fmt.Errorf("storepg: %w: %w", store.ErrUnavailable, err)
	}
	return fmt.Errorf("storepg: %w", err)
}

// isValueError reports whether Postgres refused a statement for a value it
// was given, so the same statement fails again whatever the retry: a data
// exception (class 22: a NUL byte, an invalid byte sequence, text that is
// no uuid, a number out of range), a NOT NULL or CHECK violation, or a
// value over a program limit (54000: a row too large for an index).
func isValueError(e *pgconn.PgError) bool {
	return e.Code[:2] == "22" || e.Code == "23502" || e.Code == "23514" || e.Code == "54000"
}
