package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/migrations"
)

// memory is a Driver over a list of applied versions; failOn makes applying
// that version fail, rolling its transaction back.
type memory struct {
	applied []int
	ran     []string
	failOn  int
}

func (m *memory) MigrationTx(_ context.Context, fn func(migrations.Tx) error) error {
	tx := &memoryTx{m: m, applied: slices.Clone(m.applied)}
	if err := fn(tx); err != nil {
		return err // rolled back: m is unchanged
	}
	m.applied, m.ran = tx.applied, append(m.ran, tx.ran...)
	return nil
}

type memoryTx struct {
	m       *memory
	applied []int
	ran     []string
}

func (t *memoryTx) MigrationApplied(context.Context) ([]int, error) { return t.applied, nil }

func (t *memoryTx) MigrationApply(_ context.Context, m migrations.Migration) error {
	if m.Version == t.m.failOn {
		return errors.New("syntax error")
	}
	t.applied = append(t.applied, m.Version)
	t.ran = append(t.ran, m.Name)
	return nil
}

var all = []migrations.Migration{
	{Version: 1, Name: "0001_init.up.sql"},
	{Version: 2, Name: "0002_engine.up.sql"},
	{Version: 3, Name: "0003_watch.up.sql"},
}

func TestRun(t *testing.T) {
	t.Parallel()

	t.Run("AppliesWhatIsPendingOnce", func(t *testing.T) {
		t.Parallel()
		db := &memory{applied: []int{1}}
		applied, err := migrations.Run(t.Context(), db, all)
		require.NoError(t, err)
		require.Equal(t, all[1:], applied)
		require.Equal(t, []string{"0002_engine.up.sql", "0003_watch.up.sql"}, db.ran)

		applied, err = migrations.Run(t.Context(), db, all)
		require.NoError(t, err)
		require.Empty(t, applied, "a re-run is a no-op")
		require.NoError(t, migrations.Validate(t.Context(), db, all))
	})

	t.Run("AFailedMigrationStopsAndLeavesTheEarlierOnes", func(t *testing.T) {
		t.Parallel()
		db := &memory{failOn: 2}
		applied, err := migrations.Run(t.Context(), db, all)
		require.ErrorContains(t, err, "migrate 0002_engine.up.sql: syntax error")
		require.Equal(t, all[:1], applied)
		require.Equal(t, []int{1}, db.applied)
	})

	t.Run("RefusesASchemaANewerBinaryMigrated", func(t *testing.T) {
		t.Parallel()
		db := &memory{applied: []int{1, 4}}
		_, err := migrations.Run(t.Context(), db, all)
		var schemaErr *migrations.SchemaError
		require.ErrorAs(t, err, &schemaErr)
		require.Equal(t, []int{4}, schemaErr.Unknown)
		require.Equal(t, []int{1, 4}, db.applied, "nothing applied")
	})
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		applied []int
		want    string
	}{
		{nil, "migrations not applied: 0001_init.up.sql, 0002_engine.up.sql, 0003_watch.up.sql"},
		{[]int{1, 2}, "the database schema is behind this binary: migrations not applied: 0003_watch.up.sql; apply them with `oncejob migrate` or start with --migrate"},
		{[]int{1, 2, 3, 4}, "the database schema is ahead of this binary: unknown migration versions 4; run a binary at least as new as the database"},
		{[]int{1, 3, 5}, "not applied: 0002_engine.up.sql; apply them with `oncejob migrate` or start with --migrate; the database schema is ahead of this binary: unknown migration versions 5"},
	} {
		err := migrations.Validate(t.Context(), &memory{applied: tc.applied}, all)
		require.ErrorContains(t, err, tc.want, "applied %v", tc.applied)
	}
}

func ExampleValidate() {
	// A database one migration behind this binary.
	db := &memory{applied: []int{1, 2}}
	fmt.Println(migrations.Validate(context.Background(), db, all))
	// Output: the database schema is behind this binary: migrations not applied: 0003_watch.up.sql; apply them with `oncejob migrate` or start with --migrate
}
