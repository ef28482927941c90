-- 0004_operator: what operators' RPCs need (CancelJob, ReplayJob, ResolveJob,
-- ApproveJob), and the reconciler's claim of outcome_unknown jobs.
--
-- The SQLite twin of postgres/0004_operator.up.sql, with 0001's type
-- mapping: booleans are INTEGER 0 or 1.

-- Set by ApproveJob on an awaiting_approval job: its planned output was
-- approved, so the next run publishes it instead of asking again.
ALTER TABLE jobs ADD COLUMN approved INTEGER NOT NULL DEFAULT 0
    CHECK (approved IN (0, 1));

-- Claiming now also takes outcome_unknown jobs once their run_after passes:
-- the reconciler asks the provider by key before calling again. An
-- outcome_unknown job without run_after waits for ResolveJob; its key is
-- NULL, which no claim's range scan reaches. SQLite uses an expression index
-- only for a query that repeats the expression and the WHERE terms exactly,
-- so both stay identical to JobClaimCandidates's
-- (store/storesqlite/internal/dbsqlite/engine.sql). Supersedes 0002's index
-- of the same name.
DROP INDEX jobs_claimable_idx;
CREATE INDEX jobs_claimable_idx ON jobs ((
    CASE WHEN status = 'running' THEN lease_until
        WHEN status = 'outcome_unknown' THEN run_after
        ELSE coalesce(run_after, created_at) END
)) WHERE status IN ('queued', 'retry_wait', 'running', 'outcome_unknown');
