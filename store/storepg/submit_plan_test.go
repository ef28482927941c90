package storepg_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
)

// TestSubmitDedupLookupProbesInAGenericPlan: JobSubmitMany, named while the
// submit plan gate is open, may run with a generic plan, which costs its
// arrays at ten rows. Its dedup lookup must stay a probe of
// jobs_computed_success_key per submission there: a plan that hashed the
// index would read every computed success of every tenant for each group.
// On a schema never analyzed (gate open) holding 3,000 computed successes,
// with plan_cache_mode = force_generic_plan, groups of 20 new submissions
// read at most one index entry each, and one that repeats a computed
// success is deduplicated.
func TestSubmitDedupLookupProbesInAGenericPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schemaURL, schema, migrator := migratedSchema(t)
	migrator.Close()
	admin, err := pgx.Connect(ctx, schemaURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	_, err = admin.Exec(ctx, `DO $$ DECLARE t text; BEGIN
		FOR t IN SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = current_schema() LOOP
			EXECUTE 'ALTER TABLE ' || t || ' SET (autovacuum_enabled = off)';
		END LOOP; END $$`)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `INSERT INTO jobs (id, tenant, idempotency_key, dedup_key, pipeline, pipeline_version, status, stage,
		document_sha256, document_media_type, document_size_bytes, output, finished_at)
		SELECT gen_random_uuid(), 'acme', 'done-' || g, 'dedup:v1:done-' || g, 'invoice', 3, 'succeeded', 'published',
			md5('doc' || g), 'text/plain', 40, '{"total": 1}', now()
		FROM generate_series(1, 3000) AS g`)
	require.NoError(t, err)

	st, err := storepg.Open(ctx, schemaURL+"&plan_cache_mode=force_generic_plan&pool_max_conns=1")
	require.NoError(t, err)
	t.Cleanup(st.Close)
	st.TestSignals().KeyPlansChecked.Init()
	reads := func() int64 {
		_, err := st.Pool().Exec(ctx, "SELECT pg_stat_force_next_flush()")
		require.NoError(t, err)
		_, err = admin.Exec(ctx, "SELECT pg_stat_force_next_flush()")
		require.NoError(t, err)
		var n int64
		require.NoError(t, admin.QueryRow(ctx, `SELECT coalesce(idx_tup_read, 0) FROM pg_stat_user_indexes
			WHERE schemaname = $1 AND indexrelname = 'jobs_computed_success_key'`, schema).Scan(&n))
		return n
	}
	before := reads()
	const groups, size = 8, 20
	for g := range groups {
		var jobs []*store.JobSubmitParams
		for range size {
			jobs = append(jobs, newWriteSetSubmission("acme"))
		}
		if g == groups-1 {
			jobs[0].DedupKey = "dedup:v1:done-7" // a computed success
		}
		res, err := st.JobSubmitMany(ctx, &store.JobSubmitManyParams{Jobs: jobs})
		require.NoError(t, err)
		for i, item := range res.Items {
			require.NoError(t, item.Err)
			want := store.OutcomeCreated
			if g == groups-1 && i == 0 {
				want = store.OutcomeDeduplicated
			}
			require.Equal(t, want, item.Outcome, "group %d, item %d", g, i)
		}
	}
	open, err := st.TestSignals().KeyPlansChecked.Wait()
	require.NoError(t, err)
	require.True(t, open, "the submit plan gate on tables never analyzed")
	var generic int64
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0) FROM pg_prepared_statements
		WHERE statement LIKE '-- name: JobSubmitMany %'`).Scan(&generic))
	require.Positive(t, generic, "JobSubmitMany ran with no generic plan")
	read := reads() - before
	t.Logf("jobs_computed_success_key: %d entries read by %d groups of %d (%d generic plans)", read, groups, size, generic)
	require.LessOrEqual(t, read, int64(groups*size), "the dedup lookup read more than an entry per submission")
}
