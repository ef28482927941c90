-- 0030_announce_custom_plan: Postgres makes the trigger jobs_announce plan
-- its statement at every execution (see docs/architecture.md, "Generic
-- plans for the engine, custom plans for the rest"). SQLite has no plan
-- cache across statements of this kind: nothing to change. The file keeps
-- the two stores' migration lists the same.
SELECT 1;
