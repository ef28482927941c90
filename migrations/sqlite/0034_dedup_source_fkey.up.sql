-- 0034_dedup_source_fkey: Postgres drops the foreign key
-- jobs.deduplicated_from -> jobs (see docs/architecture.md, "Submitting in
-- batches", the schema trades). SQLite keeps its foreign keys: dropping a
-- constraint means rebuilding the table, and a check is one index lookup
-- in the writer. The file keeps the two stores' migration lists the same.
SELECT 1;
