-- 0011_runs_schedules: runs (a group of items of work), the items in each,
-- the keys of run-wide operator calls; schedules and their slots. See
-- docs/architecture.md, "Runs" and "Schedules".

-- A run is a named group of items. Its idempotency key lives on the row, for
-- as long as the run exists (a run resumed days later finds it); the key
-- sweeper never frees it.
CREATE TABLE runs (
    id            uuid        PRIMARY KEY,
    tenant        text        NOT NULL,
    idem_key      text        NOT NULL,
    fingerprint   text        NOT NULL,
    name          text        NOT NULL,
    pipeline      text        NOT NULL DEFAULT '',
    model_profile text        NOT NULL DEFAULT '',
    params        jsonb       NOT NULL DEFAULT '{}',
    labels        jsonb       NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    cancelled_at  timestamptz,
    UNIQUE (tenant, idem_key)
);

CREATE INDEX runs_tenant_created_idx ON runs (tenant, created_at DESC, id DESC);

-- An item of a run: one idempotency key (SubmitJob's scope) and the job it
-- names. A job may be an item of many runs (a run that reuses another's
-- work), so membership is this table rather than a column of jobs. outcome
-- is how the item joined: 'created' (the run's own new work),
-- 'deduplicated' (its computation had succeeded) or 'existing' (its key was
-- submitted before, outside the run); the last two are reused work. The
-- row is written in the statement (Postgres) or transaction (SQLite) that
-- creates or finds the job, and the run's record of a key outlives the
-- key's idempotency window.
CREATE TABLE run_items (
    run_id      uuid        NOT NULL,
    item_key    text        NOT NULL,
    tenant      text        NOT NULL,
    fingerprint text        NOT NULL,
    job_id      uuid        NOT NULL,
    outcome     text        NOT NULL CHECK (outcome IN ('created', 'deduplicated', 'existing')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, item_key)
);

-- The keys of run-wide operator calls (RetryRunFailures) and their result,
-- so a replayed key answers the first call's result and applies nothing.
CREATE TABLE run_operations (
    tenant      text        NOT NULL,
    method      text        NOT NULL,
    idem_key    text        NOT NULL,
    fingerprint text        NOT NULL,
    run_id      uuid        NOT NULL,
    result      integer     NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, method, idem_key)
);

-- A schedule submits its job template at each slot of its cron expression
-- or interval. The server holding its lease (lease_owner until lease_until)
-- decides its slots; next_slot_at is the next slot to decide.
CREATE TABLE schedules (
    id               uuid        PRIMARY KEY,
    tenant           text        NOT NULL,
    idem_key         text        NOT NULL,
    fingerprint      text        NOT NULL,
    name             text        NOT NULL,
    cron             text        NOT NULL DEFAULT '',
    interval_ms      bigint      NOT NULL DEFAULT 0,
    time_zone        text        NOT NULL DEFAULT '',
    job              jsonb       NOT NULL,
    overlap          text        NOT NULL CHECK (overlap IN ('skip', 'buffer_one', 'allow')),
    catchup          text        NOT NULL CHECK (catchup IN ('none', 'latest')),
    misfire_ms       bigint      NOT NULL,
    paused           boolean     NOT NULL DEFAULT false,
    deleted_at       timestamptz,
    next_slot_at     timestamptz NOT NULL,
    -- The job of the latest fired slot: what the overlap policy waits for.
    last_job_id      uuid,
    -- BUFFER_ONE: the slot waiting for last_job_id to end.
    buffered_slot_at timestamptz,
    lease_owner      text,
    lease_until      timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant, idem_key)
);

CREATE INDEX schedules_tenant_created_idx ON schedules (tenant, created_at DESC, id DESC);
-- What a scheduler claims: live schedules in the order their slots come.
CREATE INDEX schedules_due_idx ON schedules (next_slot_at) WHERE NOT paused AND deleted_at IS NULL;

-- Every decided slot, once: the primary key is what makes a slot fire at
-- most once, whatever the number of servers.
CREATE TABLE schedule_slots (
    schedule_id uuid        NOT NULL,
    slot_at     timestamptz NOT NULL,
    tenant      text        NOT NULL,
    outcome     text        NOT NULL CHECK (outcome IN ('fired', 'skipped', 'buffered', 'missed')),
    job_id      uuid,
    reason      text        NOT NULL DEFAULT '',
    decided_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule_id, slot_at)
);
