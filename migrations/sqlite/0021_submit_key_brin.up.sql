-- 0021_submit_key_brin: Postgres's idempotency key index on created_at
-- becomes a BRIN index. SQLite has only B-trees, and its sweeper reads the
-- oldest keys through this index: nothing to change. The file keeps the two
-- stores' migration lists the same.
SELECT 1;
