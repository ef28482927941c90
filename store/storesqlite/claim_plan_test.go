package storesqlite_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClaimCandidatesRangeScanTheClaimableIndex guards what engine.sql and
// the migrations only say in comments: SQLite uses jobs_claimable_idx only
// while JobClaimCandidates repeats its expression and WHERE terms exactly.
// Otherwise a claim scans every job and sorts them, and still passes every
// other test. The query is read from its .sql file, whose @name parameters
// SQLite takes as they are.
func TestClaimCandidatesRangeScanTheClaimableIndex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	openTestStore(t, dir)

	queries, err := os.ReadFile(filepath.Join("internal", "dbsqlite", "engine.sql"))
	require.NoError(t, err)
	_, query, ok := strings.Cut(string(queries), "-- name: JobClaimCandidates :many")
	require.True(t, ok, "JobClaimCandidates not in engine.sql")
	query, _, _ = strings.Cut(query, "-- name:") // up to the next query

	db, err := sql.Open("sqlite", filepath.Join(dir, "oncejob.db"))
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, sql.Named("now", 0), sql.Named("max", 1))
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
	require.Len(t, plan, 1, "plan: %q", plan) // no temp b-tree for the ORDER BY
	require.Equal(t, "SEARCH jobs USING INDEX jobs_claimable_idx (<expr><?)", plan[0])
}
