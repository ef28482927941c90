-- 0018_jobs_fillfactor: Postgres's jobs table leaves room on each page for
-- heap-only updates (see docs/performance.md, "Rows and WAL per job").
-- SQLite has no fillfactor and no heap-only tuples: nothing to change. The
-- file keeps the two stores' migration lists the same.
SELECT 1;
