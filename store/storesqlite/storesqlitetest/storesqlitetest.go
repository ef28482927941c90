// Package storesqlitetest gives tests a storesqlite.Store on a data
// directory of their own whose database starts migrated: the migrations run
// once per test process, into a template whose bytes every later store
// starts from, instead of once per store. (Under -race the transpiled
// SQLite's parsing of the migrations' DDL was half of storesqlite's own
// test CPU.) Open still runs the migrator, which finds nothing to apply.
package storesqlitetest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/oncejob/oncejob/store/storesqlite"
)

// databaseFileName is the database's file in a data directory
// (storesqlite's own name for it).
const databaseFileName = "oncejob.db"

var template = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "oncejob-sqlite-template-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	s, err := storesqlite.Open(context.Background(), storesqlite.Config{DataDir: dir})
	if err != nil {
		return nil, err
	}
	s.Close() // the last connection checkpoints the WAL into the file
	return os.ReadFile(filepath.Join(dir, databaseFileName))
})

// NewTestStore opens a store on a new temporary data directory, closed when
// the test ends.
func NewTestStore(tb testing.TB) *storesqlite.Store {
	tb.Helper()
	return Open(tb, tb.TempDir())
}

// Open opens the store in dir, closed when the test ends. A data directory
// with no database yet starts from the migrated template; one with a
// database (a test reopening its store) is opened as it is.
func Open(tb testing.TB, dir string) *storesqlite.Store {
	tb.Helper()
	seed(tb, dir)
	s, err := storesqlite.Open(context.Background(), storesqlite.Config{DataDir: dir})
	if err != nil {
		tb.Fatalf("storesqlitetest: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// seed writes the migrated template into dir unless dir already holds a
// database.
func seed(tb testing.TB, dir string) {
	tb.Helper()
	path := filepath.Join(dir, databaseFileName)
	if _, err := os.Stat(path); err == nil {
		return
	} else if !errors.Is(err, fs.ErrNotExist) {
		tb.Fatalf("storesqlitetest: %v", err)
	}
	b, err := template()
	if err != nil {
		tb.Fatalf("storesqlitetest: the template database: %v", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatalf("storesqlitetest: %v", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatalf("storesqlitetest: %v", err)
	}
}
