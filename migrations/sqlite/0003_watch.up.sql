-- 0003_watch: a global order over job_events for tenant-wide watching.
--
-- The SQLite twin of postgres/0003_watch.up.sql. Postgres orders events by
-- (tx, id) and reads only below its snapshot's xmin, because its commits can
-- land out of the order their ids were drawn in. SQLite has one writer: a
-- write transaction runs only after the one before it committed or rolled
-- back, so insert order is commit order, and a reader sees a prefix of the
-- commits. An id in insert order is the whole change order (the store's
-- cursors are {Tx: 0, ID: id}), and an id handed to a reader can never be
-- overtaken by a later commit.
--
-- SQLite cannot add a primary key or a UNIQUE column to a table, so the
-- table is rebuilt with id as its rowid: SQLite assigns it on insert, and
-- AUTOINCREMENT never reuses one (like Postgres's sequence), so no query or
-- trigger computes it. (job_id, seq) stays unique, as the primary key was.
-- tenant is copied from the job by JobEventAppend, the only statement that
-- appends events, for the tenant-wide index; the schema requires it.
-- Nothing references job_events, so the rebuild rewrites no other table.
ALTER TABLE job_events RENAME TO job_events_0002;

CREATE TABLE job_events (
    job_id     TEXT    NOT NULL REFERENCES jobs (id),
    seq        INTEGER NOT NULL,
    status     TEXT    NOT NULL,
    stage      TEXT    NOT NULL,
    attempt    INTEGER NOT NULL,
    message    TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    tenant     TEXT    NOT NULL,
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    UNIQUE (job_id, seq)
) STRICT;

-- Existing events: the tenant of their job, ids in the order they were made
-- (as in Postgres). An explicit id moves AUTOINCREMENT's counter past it.
INSERT INTO job_events (job_id, seq, status, stage, attempt, message, created_at, tenant, id)
SELECT e.job_id, e.seq, e.status, e.stage, e.attempt, e.message, e.created_at, jobs.tenant,
    row_number() OVER (ORDER BY e.created_at, e.job_id, e.seq)
FROM job_events_0002 AS e
JOIN jobs ON jobs.id = e.job_id;

DROP TABLE job_events_0002;

-- WatchJobs (one tenant). The listener's tail (every tenant) reads the rowid.
CREATE INDEX job_events_tenant_id_idx ON job_events (tenant, id);
