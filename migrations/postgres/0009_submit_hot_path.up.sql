-- 0009_submit_hot_path: a lighter write per submission. See
-- docs/architecture.md, "Submitting in batches", for each trade and why the
-- guarantees hold without what is dropped.

-- The job and its document are written by the same statement (JobSubmitMany),
-- and no statement deletes a document, so the reference cannot dangle; the
-- check was a SELECT ... FOR KEY SHARE of the document per job, which also
-- locks (writes) the document's row.
ALTER TABLE jobs DROP CONSTRAINT jobs_tenant_document_sha256_fkey;

-- Every event is appended by the statement or transaction that inserts or
-- updates its job, and no statement deletes a job; the check locked the
-- job's row once per event.
ALTER TABLE job_events DROP CONSTRAINT job_events_job_id_fkey;

-- Every lookup by dedup key asks for the computed success (status
-- 'succeeded', not deduplicated), which the partial unique index
-- jobs_computed_success_key answers; this index was written for every job
-- and read by none.
DROP INDEX jobs_tenant_dedup_key_idx;
