package migrations

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Driver is what the migrator needs of a store. With Tx it is a seam of
// three methods, one per step that differs by database (how to lock, how to
// list what is applied, how to apply and record); the order of the steps,
// what is pending and what is wrong live once, here.
type Driver interface {
	// MigrationTx runs fn in one transaction that holds the database's
	// migration lock (Postgres: an advisory transaction lock; SQLite: the
	// single writer), so concurrent migrators and validators take turns.
	// It commits when fn returns nil.
	MigrationTx(ctx context.Context, fn func(tx Tx) error) error
}

// Tx is a migration transaction.
type Tx interface {
	// MigrationApplied returns the applied versions, ascending; none when
	// the database has never been migrated.
	MigrationApplied(ctx context.Context) ([]int, error)
	// MigrationApply runs m's SQL and records m as applied.
	MigrationApply(ctx context.Context, m Migration) error
}

// SchemaError says how a database's schema differs from the migrations of
// this binary.
type SchemaError struct {
	// Missing are this binary's migrations the database has not applied.
	Missing []Migration
	// Unknown are versions the database has applied that this binary does
	// not know: the database was migrated by a newer binary.
	Unknown []int
}

func (e *SchemaError) Error() string {
	var parts []string
	if len(e.Missing) > 0 {
		names := make([]string, len(e.Missing))
		for i, m := range e.Missing {
			names[i] = m.Name
		}
		parts = append(parts, "the database schema is behind this binary: migrations not applied: "+
			strings.Join(names, ", ")+"; apply them with `oncejob migrate` or start with --migrate")
	}
	if len(e.Unknown) > 0 {
		versions := make([]string, len(e.Unknown))
		for i, v := range e.Unknown {
			versions[i] = strconv.Itoa(v)
		}
		parts = append(parts, "the database schema is ahead of this binary: unknown migration versions "+
			strings.Join(versions, ", ")+"; run a binary at least as new as the database")
	}
	return strings.Join(parts, "; ")
}

// compare returns the difference between applied versions and all, or nil
// when there is none.
func compare(applied []int, all []Migration) *SchemaError {
	e := &SchemaError{}
	for _, m := range all {
		if !slices.Contains(applied, m.Version) {
			e.Missing = append(e.Missing, m)
		}
	}
	for _, v := range applied {
		if !slices.ContainsFunc(all, func(m Migration) bool { return m.Version == v }) {
			e.Unknown = append(e.Unknown, v)
		}
	}
	if len(e.Missing) == 0 && len(e.Unknown) == 0 {
		return nil
	}
	return e
}

// Run applies the migrations of all that d has not applied, in order, each
// in its own transaction holding the migration lock and checking again
// under it, so concurrent runs (many processes starting at once) apply each
// migration once and a re-run is a no-op. A database that has applied a
// version all does not know is a *SchemaError and nothing is applied: an
// older binary must not migrate a newer schema. It returns what it applied.
func Run(ctx context.Context, d Driver, all []Migration) ([]Migration, error) {
	var applied []Migration
	for _, m := range all {
		err := d.MigrationTx(ctx, func(tx Tx) error {
			done, err := tx.MigrationApplied(ctx)
			if err != nil {
				return err
			}
			if e := compare(done, all); e != nil && len(e.Unknown) > 0 {
				return &SchemaError{Unknown: e.Unknown}
			}
			if slices.Contains(done, m.Version) {
				return nil
			}
			if err := tx.MigrationApply(ctx, m); err != nil {
				return err
			}
			applied = append(applied, m)
			return nil
		})
		if err != nil {
			return applied, fmt.Errorf("migrate %s: %w", m.Name, err)
		}
	}
	return applied, nil
}

// Validate checks that d has applied exactly the migrations of all: a
// *SchemaError names the missing ones (the database is behind) and the
// unknown versions (it is ahead). Processes that do not migrate call it at
// start, so a binary run against another schema stops at once with that
// message instead of failing later in a query.
func Validate(ctx context.Context, d Driver, all []Migration) error {
	return d.MigrationTx(ctx, func(tx Tx) error {
		applied, err := tx.MigrationApplied(ctx)
		if err != nil {
			return err
		}
		if e := compare(applied, all); e != nil {
			return e
		}
		return nil
	})
}
