-- 0032_jobs_column_order: Postgres's jobs table is rebuilt with its columns
-- in the order a job's updates change them, so that an update logs only
-- the bytes it changed (see docs/performance.md, "The job row's column
-- order, and a one-key decision-cache read"). SQLite rewrites a whole row
-- at every update and logs pages, not tuples: nothing to change. The file
-- keeps the two stores' migration lists the same.
SELECT 1;
