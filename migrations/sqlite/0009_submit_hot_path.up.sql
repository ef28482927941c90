-- 0009_submit_hot_path: a lighter write per submission (see
-- docs/architecture.md, "Submitting in batches"). Every lookup by dedup key
-- asks for the computed success, which the partial unique index
-- jobs_computed_success_key answers; this index was written for every job
-- and read by none. (Postgres's 0009 also drops two foreign keys; SQLite
-- cannot drop a constraint without rebuilding the table, which costs more
-- than the checks, a lookup each in the writer.)
DROP INDEX jobs_tenant_dedup_key_idx;
