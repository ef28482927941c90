-- 0011_runs_schedules: the SQLite twin of postgres/0010_runs_schedules.up.sql
-- (runs, run items, run operations, schedules, schedule slots). Timestamps
-- are unix microseconds, JSON is text, booleans are integers.

CREATE TABLE runs (
    id            TEXT    PRIMARY KEY,
    tenant        TEXT    NOT NULL,
    idem_key      TEXT    NOT NULL,
    fingerprint   TEXT    NOT NULL,
    name          TEXT    NOT NULL,
    pipeline      TEXT    NOT NULL DEFAULT '',
    model_profile TEXT    NOT NULL DEFAULT '',
    params        TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(params)),
    labels        TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(labels)),
    created_at    INTEGER NOT NULL,
    cancelled_at  INTEGER,
    UNIQUE (tenant, idem_key)
) STRICT;

CREATE INDEX runs_tenant_created_idx ON runs (tenant, created_at DESC, id DESC);

CREATE TABLE run_items (
    run_id      TEXT    NOT NULL,
    item_key    TEXT    NOT NULL,
    tenant      TEXT    NOT NULL,
    fingerprint TEXT    NOT NULL,
    job_id      TEXT    NOT NULL,
    outcome     TEXT    NOT NULL CHECK (outcome IN ('created', 'deduplicated', 'existing')),
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (run_id, item_key)
) STRICT;

CREATE TABLE run_operations (
    tenant      TEXT    NOT NULL,
    method      TEXT    NOT NULL,
    idem_key    TEXT    NOT NULL,
    fingerprint TEXT    NOT NULL,
    run_id      TEXT    NOT NULL,
    result      INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, method, idem_key)
) STRICT;

CREATE TABLE schedules (
    id               TEXT    PRIMARY KEY,
    tenant           TEXT    NOT NULL,
    idem_key         TEXT    NOT NULL,
    fingerprint      TEXT    NOT NULL,
    name             TEXT    NOT NULL,
    cron             TEXT    NOT NULL DEFAULT '',
    interval_ms      INTEGER NOT NULL DEFAULT 0,
    time_zone        TEXT    NOT NULL DEFAULT '',
    job              TEXT    NOT NULL CHECK (json_valid(job)),
    overlap          TEXT    NOT NULL CHECK (overlap IN ('skip', 'buffer_one', 'allow')),
    catchup          TEXT    NOT NULL CHECK (catchup IN ('none', 'latest')),
    misfire_ms       INTEGER NOT NULL,
    paused           INTEGER NOT NULL DEFAULT 0,
    deleted_at       INTEGER,
    next_slot_at     INTEGER NOT NULL,
    last_job_id      TEXT,
    buffered_slot_at INTEGER,
    lease_owner      TEXT,
    lease_until      INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (tenant, idem_key)
) STRICT;

CREATE INDEX schedules_tenant_created_idx ON schedules (tenant, created_at DESC, id DESC);
CREATE INDEX schedules_due_idx ON schedules (next_slot_at) WHERE NOT paused AND deleted_at IS NULL;

CREATE TABLE schedule_slots (
    schedule_id TEXT    NOT NULL,
    slot_at     INTEGER NOT NULL,
    tenant      TEXT    NOT NULL,
    outcome     TEXT    NOT NULL CHECK (outcome IN ('fired', 'skipped', 'buffered', 'missed')),
    job_id      TEXT,
    reason      TEXT    NOT NULL DEFAULT '',
    decided_at  INTEGER NOT NULL,
    PRIMARY KEY (schedule_id, slot_at)
) STRICT;
