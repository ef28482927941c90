-- 0003_watch: a global order over job_events for tenant-wide watching, and a
-- NOTIFY for every event so watchers wake without polling.

-- tenant: copied from the job at insert (job_events_fill_tenant), for the
-- tenant-wide index. tx: the id of the writing transaction. id: insert order.
-- (tx, id) is the global order WatchJobs reads in; see docs/architecture.md,
-- "Watching": a reader only returns events whose tx is below the xmin of its
-- snapshot, so no later commit can land behind a cursor it handed out.
ALTER TABLE job_events
    ADD COLUMN tenant text,
    ADD COLUMN tx     bigint,
    ADD COLUMN id     bigint;

-- Existing events: the tenant of their job, this migration's transaction,
-- ids in the order they were made.
CREATE SEQUENCE job_events_id_seq OWNED BY job_events.id;
UPDATE job_events
SET tenant = jobs.tenant,
    tx = pg_current_xact_id()::text::bigint,
    id = ordered.n
FROM jobs, (
    SELECT job_id, seq, nextval('job_events_id_seq') AS n
    FROM (SELECT job_id, seq FROM job_events ORDER BY created_at, job_id, seq) AS o
) AS ordered
WHERE jobs.id = job_events.job_id
    AND ordered.job_id = job_events.job_id
    AND ordered.seq = job_events.seq;

-- xid8 fits a bigint for the next few billion years of transactions; a
-- bigint keeps the column plain for every client.
ALTER TABLE job_events
    ALTER COLUMN tx SET DEFAULT pg_current_xact_id()::text::bigint,
    ALTER COLUMN tx SET NOT NULL,
    ALTER COLUMN id SET DEFAULT nextval('job_events_id_seq'),
    ALTER COLUMN id SET NOT NULL,
    ALTER COLUMN tenant SET NOT NULL;

-- The listener's tail (every tenant) and WatchJobs (one tenant).
CREATE INDEX job_events_tx_id_idx ON job_events (tx, id);
CREATE INDEX job_events_tenant_tx_id_idx ON job_events (tenant, tx, id);

-- Every insert gets its job's tenant, so the statements that append events
-- (JobSubmit, JobComplete, the engine's) need not name it. A row of the
-- same statement is visible here: a data-modifying CTE that inserted the job
-- has run by the time its event is inserted.
CREATE FUNCTION job_events_fill_tenant() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.tenant IS NULL THEN
        SELECT jobs.tenant INTO NEW.tenant FROM jobs WHERE jobs.id = NEW.job_id;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER job_events_fill_tenant
    BEFORE INSERT ON job_events
    FOR EACH ROW EXECUTE FUNCTION job_events_fill_tenant();

-- Every event NOTIFYs, so no code path can forget to. The payload is small
-- ("<job id> <seq> <tenant>", the tenant cut well inside NOTIFY's 8000-byte
-- limit): NOTIFY takes a global lock at commit and its queue is shared. The channel names the schema, so deployments (and tests)
-- sharing a database in separate schemas do not wake each other; it is cut
-- to 63 bytes, the longest channel name Postgres takes. The listener
-- computes the same name (JobEventChannel in watch.sql). A notification is
-- only a hint: watchers re-read the log, and the listener also tails it.
CREATE FUNCTION job_events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(left('oncejob_events_' || TG_TABLE_SCHEMA, 63),
        NEW.job_id::text || ' ' || NEW.seq::text || ' ' || left(NEW.tenant, 1000));
    RETURN NULL;
END
$$;

CREATE TRIGGER job_events_notify
    AFTER INSERT ON job_events
    FOR EACH ROW EXECUTE FUNCTION job_events_notify();
