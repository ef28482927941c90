-- 0033_outbox_route_queue: on Postgres the unrouted events become a narrow
-- routing queue, outbox_unrouted, instead of an update of each outbox row
-- (see docs/architecture.md, "Routing and deliveries"). SQLite routes with
-- its one writer, every delivery claimed; its outbox keeps routed_at and
-- outbox_unrouted_idx: nothing to change. The file keeps the two stores'
-- migration lists the same.
SELECT 1;
