// Package storepgtest gives tests a Postgres schema of their own: a
// migrated one from a pool of schemas reused across tests (NewTestStore,
// NewMigratedSchemaURL; pooled.go), or a fresh, empty one dropped when the
// test ends (NewTestPool, NewSchemaURL) for tests of the migrations
// themselves and of the statistics a schema accumulates.
package storepgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncejob/oncejob/store/storepg"
)

// DefaultDatabaseURL is the local test server used when
// ONCEJOB_TEST_DATABASE_URL is unset.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// maxConns keeps parallel tests of many packages inside the server's
// max_connections.
const maxConns = 4

// DatabaseURL is ONCEJOB_TEST_DATABASE_URL, or DefaultDatabaseURL.
func DatabaseURL() string {
	if url := os.Getenv("ONCEJOB_TEST_DATABASE_URL"); url != "" {
		return url
	}
	return DefaultDatabaseURL
}

// NewTestStore returns a Store on a migrated, empty schema of the pool,
// which goes back to the pool at cleanup (pooled.go). The test may commit,
// listen and run concurrently with others.
func NewTestStore(tb testing.TB) *storepg.Store {
	tb.Helper()
	s := storepg.New(newPool(tb, DatabaseURL(), takeSchema(tb)))
	tb.Cleanup(s.Close) // before the pool's: cleanups run last-in first-out
	return s
}

// NewTestPool creates schema t_<random> and returns a pool whose connections
// use it as search_path; the schema is empty. Cleanup closes the pool and
// drops the schema, so the test may commit, listen and run concurrently with
// others.
func NewTestPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	url := DatabaseURL()
	schema := "t_" + randomHex(tb, 8)

	adminExec(tb, url, "CREATE SCHEMA "+schema)
	tb.Cleanup(func() { adminExec(tb, url, "DROP SCHEMA "+schema+" CASCADE") })

	config, err := pgxpool.ParseConfig(url)
	if err != nil {
		tb.Fatalf("storepgtest: parse %s: %v", url, err)
	}
	config.MaxConns = maxConns
	config.ConnConfig.RuntimeParams["search_path"] = schema
	// context.Background: tb.Context is cancelled before Cleanup runs.
	pool, err := pgxpool.NewWithConfig(context.Background(), config)
	if err != nil {
		tb.Fatalf("storepgtest: connect: %v", err)
	}
	tb.Cleanup(pool.Close) // runs before the drop: cleanups are LIFO
	return pool
}

// adminExec runs one statement on a connection of its own, so no pool
// outlives the test.
func adminExec(tb testing.TB, url, sql string) {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		tb.Fatalf("storepgtest: connect to %s (set ONCEJOB_TEST_DATABASE_URL): %v", url, err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, sql); err != nil {
		tb.Fatalf("storepgtest: %s: %v", sql, err)
	}
}

func randomHex(tb testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatalf("storepgtest: %v", err)
	}
	return hex.EncodeToString(b)
}

// NewSchemaURL creates an empty schema t_<random> and returns a database URL
// whose connections use it as search_path and carry its name as their
// application_name (WaitIdle finds them by it), for tests that start the
// real binary or open pools of their own. Cleanup drops the schema.
func NewSchemaURL(tb testing.TB) string {
	tb.Helper()
	url := DatabaseURL()
	schema := "t_" + randomHex(tb, 8)
	adminExec(tb, url, "CREATE SCHEMA "+schema)
	tb.Cleanup(func() { adminExec(tb, url, "DROP SCHEMA "+schema+" CASCADE") })
	return schemaURL(url, schema)
}

// schemaURL is url with schema as search_path and application_name.
func schemaURL(url, schema string) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + schema + "&application_name=" + schema
}

// WaitIdle waits until no connection opened on schema's NewSchemaURL is
// left on the server, after the test closed its pools. A backend flushes
// its statistics before it leaves pg_stat_activity, and a closed client's
// backend exits a moment later, so the counters of pg_stat_user_tables are
// whole only after this: read before it, they once missed writes (a
// migration's index builds counted after the "settled" read).
func WaitIdle(tb testing.TB, schema string) {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, DatabaseURL())
	if err != nil {
		tb.Fatalf("storepgtest: %v", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(30 * time.Second); ; <-tick.C {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, schema).Scan(&n); err != nil {
			tb.Fatalf("storepgtest: %v", err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("storepgtest: %d connections of schema %s still open after 30s", n, schema)
		}
	}
}
