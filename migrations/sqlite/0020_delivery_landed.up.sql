-- 0020_delivery_landed: the attempt that landed a delivery at its routing.
-- A relay routing an event to a sink that honours an idempotency key
-- (webhook, JetStream) makes the first attempt before the delivery row
-- exists and writes the row once, settled: the attempt, when it landed, is
-- recorded here (JSON: relay, external reference, HTTP status, duplicate,
-- start and end) instead of as a delivery_attempts row. The journal of a
-- delivery is its delivery_attempts rows plus this one. '' : none. See
-- docs/architecture.md, "Routing and deliveries".
ALTER TABLE deliveries ADD COLUMN landed text NOT NULL DEFAULT '';
