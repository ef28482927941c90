-- 0006_notify_after_commit: events are announced by the store after its
-- transaction commits, batched, instead of by per-row triggers inside it.
-- A NOTIFY takes a database-wide lock at commit, so a trigger made every
-- transaction that appended an event (submit, claim, checkpoint, publish)
-- queue behind every other. The statements that append events now set the
-- tenant themselves. A notification is still only a hint: the listener's
-- tail of the log finds an event whose notification was lost.
DROP TRIGGER job_events_notify ON job_events;
DROP FUNCTION job_events_notify();
DROP TRIGGER job_events_fill_tenant ON job_events;
DROP FUNCTION job_events_fill_tenant();
