package storepgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncejob/oncejob/migrations"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// holdSchema takes a pooled schema for t and returns its name with a
// connection of t's own (ready's caller, as the lock's holder would be)
// and one that uses the schema as a test would.
func holdSchema(t *testing.T) (name string, lock, use *pgx.Conn) {
	name = takeSchema(t)
	return name, connect(t, DatabaseURL()), connect(t, schemaURL(DatabaseURL(), name))
}

func connect(t *testing.T, url string) *pgx.Conn {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) })
	return conn
}

// rowsIn counts the rows of every table of the current schema but the
// migrations' own.
func rowsIn(t *testing.T, conn *pgx.Conn) int64 {
	var n int64
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT coalesce(sum((xpath('/row/c/text()',
		query_to_xml(format('SELECT count(*) AS c FROM %I', tablename), false, true, '')))[1]::text::bigint), 0)
		FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'schema_migrations'`).Scan(&n))
	return n
}

func TestPooledSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	all, err := migrations.Postgres()
	require.NoError(t, err)

	t.Run("TakenMigratedAndEmpty", func(t *testing.T) {
		t.Parallel()
		_, _, use := holdSchema(t)
		var applied int
		require.NoError(t, use.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&applied))
		require.Equal(t, len(all), applied)
		require.Zero(t, rowsIn(t, use))
	})

	t.Run("ReadyEmptiesWhatTheLastOwnerCommittedAndRestartsSequences", func(t *testing.T) {
		t.Parallel()
		name, lock, use := holdSchema(t)
		_, err := use.Exec(ctx, `INSERT INTO api_keys (id, tenant, role, sha256) VALUES ('k', 't', 'operator', 'x');
			INSERT INTO sent_messages (sink, content_hash, event_id) VALUES ('s', 'h', 'e');
			SELECT nextval('job_events_id_seq'), nextval('job_events_id_seq')`)
		require.NoError(t, err)
		require.EqualValues(t, 2, rowsIn(t, use))

		require.NoError(t, ready(ctx, lock, DatabaseURL(), name))
		use = connect(t, schemaURL(DatabaseURL(), name)) // ready ended the last
		require.Zero(t, rowsIn(t, use))
		var next int64
		require.NoError(t, use.QueryRow(ctx, `SELECT nextval('job_events_id_seq')`).Scan(&next))
		require.EqualValues(t, 1, next, "the sequence starts again")
	})

	t.Run("ReadyEndsWhatALeftOwnerStillRuns", func(t *testing.T) {
		t.Parallel()
		name, lock, use := holdSchema(t)
		var pid int
		require.NoError(t, use.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
		require.NoError(t, ready(ctx, lock, DatabaseURL(), name))
		var alive bool
		require.NoError(t, lock.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1)`, pid).Scan(&alive))
		require.False(t, alive, "a backend of the schema's last owner outlived the next take")
	})

	t.Run("AnAlteredSchemaIsMigratedAgain", func(t *testing.T) {
		t.Parallel()
		name, lock, use := holdSchema(t)
		_, err := use.Exec(ctx, `CREATE TABLE stray (n int); INSERT INTO stray VALUES (1)`)
		require.NoError(t, err)
		require.NoError(t, ready(ctx, lock, DatabaseURL(), name))
		var stray bool
		require.NoError(t, lock.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, name+".stray").Scan(&stray))
		require.False(t, stray)
		var applied int
		require.NoError(t, lock.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{name, "schema_migrations"}.Sanitize()).Scan(&applied))
		require.Equal(t, len(all), applied)
	})

	t.Run("ALeftFunctionOrTriggerIsMigratedAgain", func(t *testing.T) {
		t.Parallel()
		for _, ddl := range []string{
			// What tests/e2e's TestRelayThatCannotClaimIsNotReady does, and
			// what it leaves when it drops the trigger only.
			`CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no'; END $$;
			CREATE TRIGGER refuse BEFORE UPDATE ON deliveries FOR EACH ROW EXECUTE FUNCTION refuse()`,
			`CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no'; END $$`,
			`ALTER TABLE jobs ADD COLUMN stray int`,
		} {
			name, lock, use := holdSchema(t)
			_, err := use.Exec(ctx, ddl)
			require.NoError(t, err)
			require.NoError(t, ready(ctx, lock, DatabaseURL(), name))
			use = connect(t, schemaURL(DatabaseURL(), name))
			_, err = use.Exec(ctx, ddl)
			require.NoError(t, err, "what the last owner made is gone: %s", ddl)
		}
	})

	t.Run("ATestHoldsItsSchemaAlone", func(t *testing.T) {
		t.Parallel()
		seen := map[string]bool{}
		for range 4 {
			name := takeSchema(t)
			require.False(t, seen[name], "schema %s taken twice", name)
			seen[name] = true
		}
	})
}
