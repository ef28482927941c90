-- 0021_submit_key_brin: the idempotency key's created_at index becomes a
-- BRIN index. Its one reader is the sweeper (IdempotencyKeyDeleteExpired),
-- which frees keys older than the window; keys are inserted in created_at
-- order, so a block range summary answers it, and a new key adds no index
-- entry (a B-tree entry per submission before). See docs/performance.md,
-- "What an item writes".
DROP INDEX idempotency_keys_created_at_idx;
CREATE INDEX idempotency_keys_created_at_brin ON idempotency_keys USING brin (created_at);
