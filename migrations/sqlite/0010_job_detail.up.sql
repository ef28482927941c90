-- 0010_job_detail: the SQLite twin of postgres/0010_job_detail.up.sql: the
-- job a checkpoint was reused from ('' when computed) and the model of each
-- LLM attempt ('' for rows written before it).
ALTER TABLE job_checkpoints ADD COLUMN reused_from TEXT NOT NULL DEFAULT '';
ALTER TABLE llm_attempts ADD COLUMN model TEXT NOT NULL DEFAULT '';
