package storesqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/migrations"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storetest"
)

// TestJobEventListenWakesOnCommit: a commit notifies at once, not at the
// next poll; the conformance suite polls often enough not to tell.
func TestJobEventListenWakesOnCommit(t *testing.T) {
	t.Parallel()
	s := openTestStore(t, t.TempDir())
	ctx, cancel := context.WithCancel(t.Context())
	notes, err := s.JobEventListen(ctx, &store.JobEventListenParams{PollInterval: time.Hour})
	require.NoError(t, err)
	defer func() {
		cancel()
		for range notes {
			// drain until closed
		}
	}()

	for seq, write := range []func(id string) error{
		func(id string) error { _, err := s.JobSubmit(ctx, newSubmitParams(id)); return err },
		func(id string) error {
			_, err := storetest.Complete(ctx, s, &storetest.CompleteParams{Tenant: "tenant-a", ID: id, Output: []byte(`{}`)})
			return err
		},
	} {
		const id = "11111111-2222-4333-8444-555555555555"
		require.NoError(t, write(id))
		select {
		case n := <-notes:
			require.Equal(t, store.JobEventNotification{Tenant: "tenant-a", JobID: id, Seq: int32(seq + 1)}, n)
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d not notified", seq+1)
		}
	}
}

// TestMigrationWatchOrdersExistingEvents opens a database that a store
// without 0003_watch left, with events: the migration gives them their
// jobs' tenants and ids in the order they were made, and later events
// follow them.
func TestMigrationWatchOrdersExistingEvents(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()

	all, err := migrations.SQLite()
	require.NoError(t, err)
	db, err := sql.Open("sqlite", filepath.Join(dir, "oncejob.db"))
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL) STRICT`)
	require.NoError(t, err)
	for _, m := range all {
		if m.Version >= 3 {
			break // what a store of 0001 and 0002 left; Open applies the rest
		}
		_, err := db.ExecContext(ctx, m.SQL)
		require.NoError(t, err, m.Name)
		_, err = db.ExecContext(ctx, `INSERT INTO schema_migrations VALUES (?, 0)`, m.Version)
		require.NoError(t, err)
	}
	const (
		a = "aaaaaaaa-0000-4000-8000-000000000000"
		b = "bbbbbbbb-0000-4000-8000-000000000000"
	)
	// Foreign keys are off on this connection: no documents needed.
	_, err = db.ExecContext(ctx, `
INSERT INTO jobs (id, tenant, idempotency_key, dedup_key, pipeline, pipeline_version, status,
    document_sha256, document_media_type, document_size_bytes, last_event_seq, created_at, updated_at)
VALUES (?1, 'tenant-a', 'ka', 'da', 'invoice', 1, 'queued', 'x', 'text/plain', 1, 2, 10, 30),
    (?2, 'tenant-b', 'kb', 'db', 'invoice', 1, 'queued', 'x', 'text/plain', 1, 1, 20, 20);
INSERT INTO job_events (job_id, seq, status, stage, attempt, message, created_at)
VALUES (?1, 2, 'queued', 'uploaded', 0, 'replayed', 30),
    (?2, 1, 'queued', 'uploaded', 0, 'submitted', 20),
    (?1, 1, 'queued', 'uploaded', 0, 'submitted', 10);`, a, b)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	s := openTestStore(t, dir)
	list := func(tenant string) []store.JobChangeCursor {
		changes, err := s.JobChangeList(ctx, &store.JobChangeListParams{Tenant: tenant})
		require.NoError(t, err)
		cursors := make([]store.JobChangeCursor, len(changes))
		for i, c := range changes {
			require.Equal(t, tenant, c.Job.Tenant)
			cursors[i] = c.Cursor
		}
		return cursors
	}
	require.Equal(t, []store.JobChangeCursor{{ID: 1}, {ID: 3}}, list("tenant-a"))
	require.Equal(t, []store.JobChangeCursor{{ID: 2}}, list("tenant-b"))

	_, err = storetest.Complete(ctx, s, &storetest.CompleteParams{Tenant: "tenant-b", ID: b, Output: []byte(`{}`)})
	require.NoError(t, err)
	require.Equal(t, []store.JobChangeCursor{{ID: 2}, {ID: 4}}, list("tenant-b"))
}

var sqlcEmbed = regexp.MustCompile(`sqlc\.embed\((\w+)\)`)

// TestWatchQueriesRangeScanTheirIndexes: JobChangeList reads the tenant's
// part of job_events_tenant_id_idx and the tail reads the rowid, each in
// order, so neither scans the log nor sorts it.
func TestWatchQueriesRangeScanTheirIndexes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	openTestStore(t, dir)

	queries, err := os.ReadFile(filepath.Join("internal", "dbsqlite", "watch.sql"))
	require.NoError(t, err)
	db, err := sql.Open("sqlite", filepath.Join(dir, "oncejob.db"))
	require.NoError(t, err)
	defer db.Close()

	planOf := func(name string) []string {
		_, query, ok := strings.Cut(string(queries), "-- name: "+name+" :many")
		require.True(t, ok, "%s not in watch.sql", name)
		query, _, _ = strings.Cut(query, "-- name:")
		query = sqlcEmbed.ReplaceAllString(query, "$1.*") // sqlc's, not SQLite's
		rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query,
			sql.Named("tenant", "t"), sql.Named("after_id", 0), sql.Named("status", ""),
			sql.Named("pipeline", ""), sql.Named("max", 1), sql.Named("max_bytes", 1<<20))
		require.NoError(t, err)
		defer rows.Close()
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			plan = append(plan, detail)
		}
		require.NoError(t, rows.Err())
		return plan
	}
	// JobChangeList sizes a page of at most @max rows (LIMIT inside the
	// innermost subquery), then joins the rows it keeps back by key: the
	// log is read by its tenant index and by rowid, never scanned, and what
	// is sorted is that page, not the log.
	changes := planOf("JobChangeList")
	require.Contains(t, changes, "SEARCH job_events USING INDEX job_events_tenant_id_idx (tenant=? AND id>?)")
	require.Contains(t, changes, "SEARCH job_events USING INTEGER PRIMARY KEY (rowid=?)")
	for _, step := range changes {
		require.NotRegexp(t, `^SCAN (job_events|jobs)\b`, step, "JobChangeList scans a table: %q", changes)
	}
	require.Equal(t, []string{"SEARCH job_events USING INTEGER PRIMARY KEY (rowid>?)"}, planOf("JobEventTail"))
}
