-- 0019_outbox_insert: Postgres's jobs_announce stops paying for a
-- speculative insertion per outbox row (see docs/performance.md, "Rows and
-- WAL per job"). SQLite writes its outbox rows in the store's code and has
-- no speculative insertion: nothing to change. The file keeps the two
-- stores' migration lists the same.
SELECT 1;
