-- 0029_publish_outbox: Postgres's publishing statement writes its outbox
-- events itself instead of through a trigger (see docs/performance.md, "The
-- cost of a job"). SQLite writes its outbox rows in the store's code
-- already: nothing to change. The file keeps the two stores' migration
-- lists the same.
SELECT 1;
