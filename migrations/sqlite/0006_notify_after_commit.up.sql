-- 0006_notify_after_commit: Postgres drops its per-row event triggers and
-- notifies after commit. The SQLite store always did (in-process, after
-- each commit), so nothing changes here; the file keeps the version numbers
-- of both dialects equal.
SELECT 1;
