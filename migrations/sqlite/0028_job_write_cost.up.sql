-- 0028_job_write_cost: Postgres drops three foreign keys to jobs and two
-- indexes a light job wrote entries in (see docs/performance.md, "The cost
-- of a job"). SQLite keeps its foreign keys (dropping one means rebuilding
-- the table; docs/architecture.md, "Schema trades") and its indexes: nothing
-- to change. The file keeps the two stores' migration lists the same.
SELECT 1;
