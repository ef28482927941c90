package storepg_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// submitWrites is what one batch of new submissions wrote, by relation:
// heap tuples inserted (tables, TOAST included) and B-tree leaf entries
// inserted (indexes; a page split carries its entry), read from the WAL between two LSNs (pg_walinspect,
// by relfilenode). A BRIN index writes no record per row, only when a
// range is summarised, so it shows as few records.
type submitWrites map[string]int64

func (w submitWrites) String() string {
	var parts []string
	for rel, n := range w {
		parts = append(parts, fmt.Sprintf("%s=%d", rel, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func (w submitWrites) sum(kind string) (n int64) {
	for rel, c := range w {
		if strings.HasPrefix(rel, kind+":") {
			n += c
		}
	}
	return n
}

func newWriteSetSubmission(tenant string) *store.JobSubmitParams {
	key := uuid.NewString()
	doc := []byte(key + strings.Repeat("x", 1024-len(key)))
	sum := sha256.Sum256(doc)
	return &store.JobSubmitParams{
		ID: uuid.NewString(), Tenant: tenant, Method: "/oncejob.v1.JobService/SubmitJob",
		IdempotencyKey: "key-" + key, Fingerprint: "fp-" + key, DedupKey: "dedup:v1:" + key,
		Pipeline: "invoice", PipelineVersion: 3, PromptVersion: "p7", ModelProfile: "fast",
		Document: doc, DocumentSHA256: hex.EncodeToString(sum[:]), DocumentMedia: "text/plain",
		DocumentName: "invoice.txt", Params: []byte(`{"currency":"EUR"}`),
		Labels: map[string]string{"team": "billing"},
	}
}

// measureSubmitWrites submits n new items in one JobSubmitMany call on a
// schema of its own and returns the rows and index entries it wrote.
func measureSubmitWrites(t *testing.T, n int) submitWrites {
	t.Helper()
	ctx := context.Background()
	schemaURL := storepgtest.NewSchemaURL(t)
	u, err := url.Parse(schemaURL)
	require.NoError(t, err)
	schema := u.Query().Get("search_path")
	pool, err := pgxpool.New(ctx, schemaURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, storepg.Migrate(ctx, pool))
	st := storepg.New(pool)
	t.Cleanup(st.Close)
	admin, err := pgx.Connect(ctx, storepgtest.DatabaseURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	if _, err := admin.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`); err != nil {
		_, err = admin.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`) // a concurrent test created it
		require.NoError(t, err, "pg_walinspect (contrib, in Debian's postgresql-15)")
	}

	submitBatch := func() {
		jobs := make([]*store.JobSubmitParams, n)
		for i := range jobs {
			jobs[i] = newWriteSetSubmission("tenant-a")
		}
		res, err := st.JobSubmitMany(ctx, &store.JobSubmitManyParams{Jobs: jobs})
		require.NoError(t, err)
		for _, it := range res.Items {
			require.NoError(t, it.Err)
			require.Equal(t, store.OutcomeCreated, it.Outcome)
		}
	}
	submitBatch() // the first batch may meet empty indexes and relations
	var from, to string
	require.NoError(t, admin.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&from))
	submitBatch()
	require.NoError(t, admin.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn()::text`).Scan(&to))

	rows, err := admin.Query(ctx, `
		WITH rel AS (
			SELECT c.relname, c.relkind, pg_relation_filenode(c.oid) AS node
			FROM pg_class c WHERE c.relnamespace = $3::regnamespace AND c.relkind IN ('r', 'i')
			UNION ALL
			SELECT c.relname || '(toast)', 'r', pg_relation_filenode(c.reltoastrelid)
			FROM pg_class c WHERE c.relnamespace = $3::regnamespace AND c.reltoastrelid <> 0
		)
		SELECT CASE WHEN rel.relkind = 'i' THEN 'index:' ELSE 'table:' END || rel.relname, count(*)
		FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn) AS w
		CROSS JOIN LATERAL (SELECT (regexp_match(w.block_ref, 'rel \d+/\d+/(\d+)'))[1]::oid AS node) AS b
		JOIN rel ON rel.node = b.node
		WHERE (w.resource_manager = 'Heap' AND w.record_type LIKE 'INSERT%')
			OR (w.resource_manager = 'Heap2' AND w.record_type LIKE 'MULTI_INSERT%')
			OR (w.resource_manager = 'Btree' AND (w.record_type LIKE 'INSERT_LEAF%' OR w.record_type LIKE 'SPLIT%'))
			OR w.resource_manager = 'BRIN'
		GROUP BY 1`, from, to, schema)
	require.NoError(t, err)
	writes := submitWrites{}
	for rows.Next() {
		var rel string
		var c int64
		require.NoError(t, rows.Scan(&rel, &c))
		writes[rel] = c
	}
	require.NoError(t, rows.Err())
	return writes
}

// TestSubmitWriteSet measures what a new submission writes on Postgres:
// rows per table and index entries per index, per item of a 200-item
// JobSubmitMany (docs/performance.md, "What an item writes"). It holds the
// figures as a guard against growth.
func TestSubmitWriteSet(t *testing.T) {
	t.Parallel()
	const n = 200
	w := measureSubmitWrites(t, n)
	t.Logf("per %d items: %s", n, w)
	perItem := func(kind string) float64 { return float64(w.sum(kind)) / n }
	t.Logf("per item: %.2f rows, %.2f index entries", perItem("table"), perItem("index"))
	require.InDelta(t, 4, perItem("table"), 0.05, "key, document, job, event: %s", w)
	require.LessOrEqual(t, perItem("index"), 11.05, "index entries per item: %s", w)
}

// BenchmarkJobSubmitMany1000 is the Postgres store's share of a 1,000-item
// SubmitJobs call with 1 KiB documents (docs/performance.md).
func BenchmarkJobSubmitMany1000(b *testing.B) {
	st := storepgtest.NewTestStore(b)
	for b.Loop() {
		b.StopTimer()
		jobs := make([]*store.JobSubmitParams, 1000)
		for i := range jobs {
			jobs[i] = newWriteSetSubmission("tenant-a")
		}
		b.StartTimer()
		res, err := st.JobSubmitMany(b.Context(), &store.JobSubmitManyParams{Jobs: jobs})
		require.NoError(b, err)
		require.Equal(b, store.OutcomeCreated, res.Items[999].Outcome)
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "items/s")
}
