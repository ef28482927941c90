package storepgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncejob/oncejob/migrations"
	"github.com/oncejob/oncejob/store/storepg"
)

// A pooled schema is migrated once and emptied for each test that takes
// it, as River's test databases are reused: migrating a fresh schema costs
// the server about 0.35 CPU-s, emptying a used one a few milliseconds
// (docs/performance.md, "The test suite's time").
//
// The pool lives in the database, not in a test process, so the test
// processes of every package share it: schemas tp_<migrations>_<n>, where
// <migrations> hashes the Postgres migrations (a branch with other
// migrations gets schemas of its own), each owned by whichever connection
// holds its session advisory lock. A test holds that lock until its
// cleanup; a test process that dies releases it with its connections.
//
// Isolation: a test takes a schema no one else holds, ends what a dead
// owner's clients left running on it (they carry its name as
// application_name) and empties every table before it uses it, so it sees
// no row of another test and may commit and LISTEN (the notification
// channel names the schema). What it does not get is fresh statistics:
// a test that reads pg_stat_user_tables or needs an empty schema uses
// NewSchemaURL or NewTestPool. The schema's shape is checked at each
// take (a digest of its relations, columns, functions and triggers,
// recorded when it was migrated): a schema a test altered - a trigger
// added to make a statement fail, a function left behind - is dropped and
// migrated again.

// poolLockSeed keys the pool's advisory locks apart from the migrator's
// (storepg's hashtextextended(schema, 0x6f6e63656a6f62)).
const poolLockSeed = 0x706f6f6c7374

// maxPooled bounds the pool: more tests at once than this over every
// test process means something holds schemas it should have released.
const maxPooled = 200

// NewMigratedSchemaURL takes a migrated, empty schema from the pool for
// tb and returns a database URL whose connections use it as search_path
// and carry its name as application_name, as NewSchemaURL's do. The
// schema goes back to the pool at cleanup; everything that connected with
// the URL must be gone by then (the next owner ends what is left).
func NewMigratedSchemaURL(tb testing.TB) string {
	tb.Helper()
	return schemaURL(DatabaseURL(), takeSchema(tb))
}

// takeSchema locks a pooled schema for tb, readies it and returns its name.
func takeSchema(tb testing.TB) string {
	tb.Helper()
	ctx := context.Background()
	url := DatabaseURL()
	prefix := "tp_" + migrationsHash(tb) + "_"
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		tb.Fatalf("storepgtest: connect to %s (set ONCEJOB_TEST_DATABASE_URL): %v", url, err)
	}
	// The lock is the connection's: closing it gives the schema back.
	// Registered first, so it runs after the cleanups of what used it.
	tb.Cleanup(func() { _ = conn.Close(ctx) })
	for n := range maxPooled {
		name := prefix + strconv.Itoa(n)
		var mine bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, $2))`, name, int64(poolLockSeed)).Scan(&mine); err != nil {
			tb.Fatalf("storepgtest: lock %s: %v", name, err)
		}
		if mine {
			if err := ready(ctx, conn, url, name); err != nil {
				tb.Fatalf("storepgtest: ready pooled schema %s: %v", name, err)
			}
			return name
		}
	}
	tb.Fatalf("storepgtest: all %d pooled schemas %s* are held", maxPooled, prefix)
	return ""
}

// ready makes schema name migrated and empty, on conn that holds its lock.
func ready(ctx context.Context, conn *pgx.Conn, url, name string) error {
	// Whatever still runs on the schema belongs to an owner that has
	// let it go (a killed process's backend can finish a statement after
	// its client died): end it before emptying, and wait for the end.
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid, 30000) FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> pg_backend_pid()`, name); err != nil {
		return err
	}
	var marker *string
	var shape string
	err := conn.QueryRow(ctx, `SELECT d.description, `+schemaShape+`
		FROM pg_namespace n LEFT JOIN pg_description d ON d.objoid = n.oid AND d.classoid = 'pg_namespace'::regclass
		WHERE n.nspname = $1`, name).Scan(&marker, &shape)
	switch {
	case err == nil && marker != nil && *marker == readyMarker(shape):
		return empty(ctx, conn, name)
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return err
	}
	// New, half-migrated (its migrator died) or altered: make it again.
	return migrateFresh(ctx, conn, url, name)
}

func readyMarker(shape string) string {
	return "storepgtest pooled schema, shape " + shape
}

// schemaShape is the md5 of what a migration makes in schema n (an alias
// of pg_namespace): relations, columns, functions with their source and
// triggers with their state.
const schemaShape = `md5(concat_ws('|',
	(SELECT string_agg(c.relname || ':' || c.relkind::text, ',' ORDER BY c.relname) FROM pg_class c WHERE c.relnamespace = n.oid),
	(SELECT string_agg(c.relname || '.' || a.attname || ':' || a.atttypid || ':' || a.attnotnull, ',' ORDER BY c.relname, a.attnum)
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
		WHERE c.relnamespace = n.oid AND c.relkind IN ('r', 'p', 'v', 'm') AND a.attnum > 0 AND NOT a.attisdropped),
	(SELECT string_agg(p.proname || ':' || md5(p.prosrc), ',' ORDER BY p.proname, md5(p.prosrc)) FROM pg_proc p WHERE p.pronamespace = n.oid),
	(SELECT string_agg(c.relname || '.' || tg.tgname || ':' || tg.tgenabled::text, ',' ORDER BY c.relname, tg.tgname)
		FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid WHERE c.relnamespace = n.oid AND NOT tg.tgisinternal)))`

// migrateFresh drops and recreates schema name, migrates it and marks it
// ready with its shape.
func migrateFresh(ctx context.Context, conn *pgx.Conn, url, name string) error {
	id := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+id+" CASCADE; CREATE SCHEMA "+id); err != nil {
		return err
	}
	config, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	config.MaxConns = 1
	config.ConnConfig.RuntimeParams["search_path"] = name
	config.ConnConfig.RuntimeParams["application_name"] = name
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return err
	}
	err = storepg.Migrate(ctx, pool)
	pool.Close()
	if err != nil {
		return err
	}
	var shape string
	if err := conn.QueryRow(ctx, `SELECT `+schemaShape+` FROM pg_namespace n WHERE n.nspname = $1`, name).Scan(&shape); err != nil {
		return err
	}
	// COMMENT takes no parameters; the marker is ours, letters and hex.
	_, err = conn.Exec(ctx, "COMMENT ON SCHEMA "+id+" IS '"+readyMarker(shape)+"'")
	return err
}

// emptyTables truncates the tables of the current schema that hold rows
// (TRUNCATE gives even an empty table new files; a test uses few tables)
// and restarts the sequences a test advanced, so a test sees the schema a
// migration leaves. No migration inserts rows; one that did would need
// them restored here.
const emptyTables = `DO $$
DECLARE
	t text;
	used text[] := '{}';
	has boolean;
BEGIN
	FOR t IN SELECT quote_ident(tablename) FROM pg_tables
		WHERE schemaname = current_schema() AND tablename <> 'schema_migrations'
	LOOP
		EXECUTE 'SELECT EXISTS (SELECT FROM ' || t || ')' INTO has;
		IF has THEN used := used || t; END IF;
	END LOOP;
	IF cardinality(used) > 0 THEN
		EXECUTE 'TRUNCATE ' || array_to_string(used, ', ') || ' CASCADE';
	END IF;
	FOR t IN SELECT quote_ident(sequencename) FROM pg_sequences
		WHERE schemaname = current_schema() AND last_value IS NOT NULL
	LOOP
		EXECUTE 'ALTER SEQUENCE ' || t || ' RESTART';
	END LOOP;
END $$`

func empty(ctx context.Context, conn *pgx.Conn, name string) error {
	_, err := conn.Exec(ctx, "SET search_path = "+pgx.Identifier{name}.Sanitize()+"; "+emptyTables+"; RESET search_path")
	return err
}

// migrationsHash names this tree's Postgres migrations: 12 hex digits of
// the SHA-256 of their versions and text.
func migrationsHash(tb testing.TB) string {
	tb.Helper()
	all, err := migrations.Postgres()
	if err != nil {
		tb.Fatalf("storepgtest: %v", err)
	}
	h := sha256.New()
	for _, m := range all {
		_, _ = fmt.Fprintf(h, "%d\x00%s\x00", m.Version, m.SQL)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// newPool opens a pool on schema with the test's connection budget,
// closed at cleanup.
func newPool(tb testing.TB, url, schema string) *pgxpool.Pool {
	tb.Helper()
	config, err := pgxpool.ParseConfig(url)
	if err != nil {
		tb.Fatalf("storepgtest: parse %s: %v", url, err)
	}
	config.MaxConns = maxConns
	config.ConnConfig.RuntimeParams["search_path"] = schema
	config.ConnConfig.RuntimeParams["application_name"] = schema
	// context.Background: tb.Context is cancelled before Cleanup runs.
	pool, err := pgxpool.NewWithConfig(context.Background(), config)
	if err != nil {
		tb.Fatalf("storepgtest: connect: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}
