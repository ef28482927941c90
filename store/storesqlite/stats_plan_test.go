package storesqlite_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJobStatsReadOnlyTheUnfinishedJobs guards what view.sql says in
// comments: the stats a /metrics scrape asks for read the partial indexes of
// the unfinished jobs and the undelivered events, never a whole table, so
// millions of finished jobs and delivered events cost a scrape nothing.
func TestJobStatsReadOnlyTheUnfinishedJobs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	openTestStore(t, dir)
	queries, err := os.ReadFile(filepath.Join("internal", "dbsqlite", "view.sql"))
	require.NoError(t, err)
	db, err := sql.Open("sqlite", filepath.Join(dir, "oncejob.db"))
	require.NoError(t, err)
	defer db.Close()

	plan := func(name string) []string {
		_, query, ok := strings.Cut(string(queries), "-- name: "+name+" ")
		require.True(t, ok, "%s not in view.sql", name)
		_, query, _ = strings.Cut(query, "\n")
		query, _, _ = strings.Cut(query, "-- name:")
		rows, err := db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, sql.Named("now", 0), sql.Named("tenant", "acme"))
		require.NoError(t, err)
		defer rows.Close()
		var details []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			details = append(details, detail)
		}
		require.NoError(t, rows.Err())
		return details
	}
	require.Equal(t, []string{"SEARCH jobs USING COVERING INDEX jobs_active_status_pipeline_idx (status=?)"}, plan("JobStatsActive"))
	require.Equal(t, []string{"SEARCH jobs USING INDEX jobs_claimable_idx (<expr><?)"}, plan("JobStatsClaimable"))
	require.Equal(t, []string{"SCAN outbox USING INDEX outbox_unrouted_idx"}, plan("OutboxStatsUnrouted"))
	require.Equal(t, []string{"SCAN deliveries USING INDEX deliveries_due_idx", "USE TEMP B-TREE FOR GROUP BY"}, plan("OutboxStatsPending"))
	// CountJobs, which consoles and scripts poll, reads the tenant's
	// index entries and no job row.
	require.Equal(t, []string{"SEARCH jobs USING COVERING INDEX jobs_tenant_status_created_idx (tenant=?)"}, plan("JobCountByStatus"))
}
