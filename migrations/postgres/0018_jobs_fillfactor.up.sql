-- 0018_jobs_fillfactor: room on each page of jobs for HOT updates. A job's
-- row is updated three times per attempt (claim, the post-call checkpoint
-- write, publish); the middle one changes no indexed column, so with free
-- space on the page it is a heap-only tuple: no new entry in any of the
-- table's eight indexes. See docs/performance.md, "Rows and WAL per job".
ALTER TABLE jobs SET (fillfactor = 70);
