package storepg

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// routePartitions is how many partitions routing splits the outbox into,
// by a hash of the job id (OutboxRouteBatch): one routing at a time per
// partition, so the events of a job are routed in order, and routings of
// different partitions at once. A power of two, and the same for every
// relay on a database: a constant, not a setting.
const routePartitions = 8

// routeShare: a routing looks at the oldest routeShare pages of unrouted
// events and takes partitions until they hold 1/routeShare of them
// (routeLock), so that a backlog is routed by this many routings at once
// and a trickle by one.
const routeShare = 2

// routedRow is one delivery a routing writes.
type routedRow struct {
	event       *dbsqlc.Outbox
	sink        string
	status      store.DeliveryStatus
	attempt     int32 // 0: not attempted, pending and due now
	dueAt       time.Time
	outcome     string
	err         string
	externalRef string
	landed      string
}

// journalRow is one element of OutboxRouteWrite's @journal, read by
// jsonb_to_recordset: an attempt at routing that did not land.
type journalRow struct {
	OutboxID    int64     `json:"outbox_id"`
	Sink        string    `json:"sink"`
	Outcome     string    `json:"outcome"`
	HTTPStatus  int32     `json:"http_status"`
	Error       string    `json:"error"`
	ExternalRef string    `json:"external_ref"`
	Duplicate   bool      `json:"duplicate"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
	LatencyMS   int64     `json:"latency_ms"`
}

// routePlan is a routing's writes: its events, their deliveries in outbox
// order, the ones attempted at routing (direct[i] is rows[at[i]]) and the
// journal of those attempts that did not land.
type routePlan struct {
	events  []dbsqlc.OutboxRouteBatchRow
	rows    []routedRow
	direct  []*store.Delivery
	at      []int
	journal []journalRow
}

// routePlanSettings make the routing's plans the ones its queries are
// written for, whatever the statistics say: walk the routing queue
// (outbox_unrouted's primary key) in id order, keep the partition's events,
// fetch each one's outbox row by its key and stop at the limit (a planner
// that believes few events are of the partition reads every unrouted event
// and sorts them: a backlog's every round; one that merges the queue with
// the outbox's primary key walks the outbox's whole history). The sort these settings price out
// remains for the few partitions, so JIT, which the price would call for,
// is off. The transaction's own idle timeout, when hold is set, is in the
// same round trip, and so are the BEGIN and the partitions' locks
// (routeTx).
func routePlanSettings(hold time.Duration) string {
	q := `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
	set_config('enable_sort', 'off', true), set_config('enable_mergejoin', 'off', true),
	set_config('enable_hashjoin', 'off', true), set_config('jit', 'off', true)`
	if hold > 0 {
		q += fmt.Sprintf(", set_config('idle_in_transaction_session_timeout', '%d', true)", hold.Milliseconds())
	}
	return q
}

// routeLock locks partitions of the outbox for a routing (one routing at a
// time per partition, so the events of a job are routed in the order they
// were written, while routings of other partitions run at once) and keeps
// the list of those it holds in the transaction's setting
// oncejob.route_partitions, which OutboxRouteBatch reads. Among the
// routeShare * limit oldest unrouted events it walks their partitions, the
// one of the oldest event first, and locks, without waiting, each one no
// other transaction holds, until the partitions it holds have a page
// (limit) of those events, or it ran out of partitions: a trickle is
// routed by one routing, a backlog by several at once. Past the page: the
// oldest page can be all of partitions another routing holds, its events
// unrouted until it commits, and a routing that looked at that page alone
// found nothing to route while other partitions had events
// (TestASecondRoutingLooksPastTheFirstsPage). The lock's
// per-schema key is also taken shared: a relay of before the partitions
// took it alone, and the two never route at once. It is a statement of its
// own, before the read: the read's snapshot must be taken with the locks
// held (OutboxRouteBatch). docs/architecture.md, "Routing and deliveries".
func routeLock(limit int) string {
	return fmt.Sprintf(`WITH RECURSIVE recent AS (
    SELECT id, (hashtext(job_id::text) & (%[1]d - 1)) AS part
    FROM outbox_unrouted
    ORDER BY id
    LIMIT %[2]d
),
candidate AS (
    SELECT part, count(*) AS n, row_number() OVER (ORDER BY min(id)) AS rn
    FROM recent
    GROUP BY part
),
walk (rn, part, held, mine) AS (
    SELECT 0::bigint, -1, 0::bigint, false
    WHERE pg_try_advisory_xact_lock_shared(hashtext('oncejob.outbox_route.' || current_schema()))
    UNION ALL
    SELECT c.rn, c.part, w.held + CASE WHEN l.ok THEN c.n ELSE 0 END, l.ok
    FROM walk AS w
        CROSS JOIN LATERAL (SELECT candidate.* FROM candidate WHERE candidate.rn = w.rn + 1) AS c
        CROSS JOIN LATERAL (SELECT pg_try_advisory_xact_lock(
            hashtext('oncejob.outbox_route.' || current_schema()), c.part) AS ok) AS l
    WHERE w.held < %[3]d
)
SELECT set_config('oncejob.route_partitions', coalesce(string_agg(part::text, ','), ''), true)
FROM walk WHERE mine`, routePartitions, routeShare*limit, max(1, limit))
}

// routeTx runs fn in a routing's transaction: its BEGIN, its planner
// settings (routePlanSettings) and its partitions' locks (routeLock) are
// one round trip; fn reads their events with routeBatch. hold, when set,
// ends the transaction's session should it stay idle that long.
func (s *Store) routeTx(ctx context.Context, limit int, hold time.Duration, fn func(pgx.Tx) error) error {
	begin := "BEGIN; " + routePlanSettings(hold) + "; " + routeLock(limit)
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{BeginQuery: begin}, fn)
}

// routeBatch reads the oldest unrouted events, up to limit, of the
// partitions its routeTx locked; none when it locked none (another routing
// holds every partition with events, or nothing is to be routed).
func (s *Store) routeBatch(ctx context.Context, tx pgx.Tx, limit int) ([]dbsqlc.OutboxRouteBatchRow, error) {
	return s.q.OutboxRouteBatch(ctx, tx, dbsqlc.OutboxRouteBatchParams{Partitions: routePartitions, Max: int64(limit)})
}

// write inserts the plan's deliveries and journal rows and takes its
// events out of the routing queue, in one statement.
func (p *routePlan) write(ctx context.Context, s *Store, tx pgx.Tx, owner string) error {
	n := len(p.rows)
	w := dbsqlc.OutboxRouteWriteParams{
		Owner: owner, Journal: "[]", RoutedIds: make([]int64, 0, len(p.events)),
		OutboxIds: make([]int64, 0, n), EventIds: make([]string, 0, n), EventTypes: make([]string, 0, n),
		Tenants: make([]string, 0, n), JobIds: make([]string, 0, n), Sinks: make([]string, 0, n),
		Statuses: make([]string, 0, n), Attempts: make([]int64, 0, n), DueAts: make([]time.Time, 0, n),
		Outcomes: make([]string, 0, n), Errors: make([]string, 0, n), ExternalRefs: make([]string, 0, n),
		Landed: make([]string, 0, n),
	}
	for _, e := range p.events {
		w.RoutedIds = append(w.RoutedIds, e.Outbox.ID)
	}
	for _, r := range p.rows {
		w.OutboxIds = append(w.OutboxIds, r.event.ID)
		w.EventIds = append(w.EventIds, r.event.EventID)
		w.EventTypes = append(w.EventTypes, r.event.EventType)
		w.Tenants = append(w.Tenants, r.event.Tenant)
		w.JobIds = append(w.JobIds, r.event.JobID)
		w.Sinks = append(w.Sinks, r.sink)
		w.Statuses = append(w.Statuses, string(r.status))
		w.Attempts = append(w.Attempts, int64(r.attempt))
		w.DueAts = append(w.DueAts, r.dueAt)
		w.Outcomes = append(w.Outcomes, r.outcome)
		w.Errors = append(w.Errors, r.err)
		w.ExternalRefs = append(w.ExternalRefs, r.externalRef)
		w.Landed = append(w.Landed, r.landed)
	}
	if len(p.journal) > 0 {
		j, err := json.Marshal(p.journal)
		if err != nil {
			return fmt.Errorf("storepg: routing journal: %w", err)
		}
		w.Journal = string(j)
	}
	// A named statement (docs/architecture.md, "Generic plans for the
	// engine, custom plans for the rest"): parsed once a connection, and
	// from its sixth execution its generic plan, not a plan of the arrays'
	// every element at each routing; that plan has no index to choose but
	// outbox_unrouted's key, whatever the statistics.
	return s.q.OutboxRouteWrite(ctx, execMode{db: tx, mode: pgx.QueryExecModeCacheStatement}, w)
}

// OutboxRouteDeliver implements store.OutboxDeliverer. The transaction
// locks partitions of the outbox as OutboxRoute does, reads their batch,
// attempts the deliveries that may go at once - a direct sink's, not
// disabled, with no pending delivery of the same job and sink before it (in
// the table or earlier in the batch) - then writes every delivery once and
// takes the events out of the routing queue, in one statement. The transaction ends after
// params.Hold at the latest (its session too, should the relay stop
// answering), so a stuck relay does not hold its partitions.
func (s *Store) OutboxRouteDeliver(ctx context.Context, params *store.OutboxRouteDeliverParams) (int, error) {
	hold := params.Hold
	if hold <= 0 {
		hold = 30 * time.Second
	}
	// The sends obey ctx; the transaction outlives its cancellation so that
	// what was sent is written.
	sendCtx, cancelSend := context.WithTimeout(ctx, hold)
	defer cancelSend()
	txCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hold+5*time.Second)
	defer cancel()
	routed := 0
	limit := params.PageLimit()
	err := s.routeTx(txCtx, limit, hold+time.Second, func(tx pgx.Tx) error {
		events, err := s.routeBatch(txCtx, tx, limit)
		if err != nil || len(events) == 0 {
			return err
		}
		plan := planRoute(params, events)
		if len(plan.direct) > 0 {
			plan.settle(params.Owner, params.Deliver(sendCtx, plan.direct))
		}
		routed = len(events)
		return plan.write(txCtx, s, tx, params.Owner)
	})
	if err != nil {
		return 0, interpretError(err)
	}
	return routed, nil
}

// planRoute makes the routing's deliveries, pending and due now, and picks
// those attempted at routing.
func planRoute(params *store.OutboxRouteDeliverParams, events []dbsqlc.OutboxRouteBatchRow) *routePlan {
	plan := &routePlan{events: events}
	disabled := events[0].DisabledSinks
	blocked := map[string]bool{}
	now := time.Now()
	for i := range events {
		e := &events[i].Outbox
		out := outboxFromRow(*e)
		for _, sink := range events[i].PendingSinks {
			blocked[out.JobID+"\x00"+sink] = true
		}
		for _, sink := range params.Route(out) {
			key := out.JobID + "\x00" + sink
			plan.rows = append(plan.rows, routedRow{event: e, sink: sink, status: store.DeliveryStatusPending})
			wait := blocked[key] || !params.Direct(sink) || slices.Contains(disabled, sink)
			blocked[key] = true // a later event of the job waits for this one
			if wait {
				continue
			}
			plan.at = append(plan.at, len(plan.rows)-1)
			plan.direct = append(plan.direct, &store.Delivery{
				OutboxID: e.ID, EventID: e.EventID, EventType: e.EventType, Sink: sink, Tenant: e.Tenant,
				JobID: out.JobID, Status: store.DeliveryStatusPending, Attempt: 1, Attempts: 1,
				BudgetStartedAt: now, CreatedAt: now, UpdatedAt: now, Payload: out.Payload, EventCreatedAt: e.CreatedAt, // read only: one copy of the payload
			})
		}
	}
	return plan
}

// settle writes the routing attempts' results into their rows: a landed
// attempt is recorded on the row, any other is journaled.
func (p *routePlan) settle(owner string, results []store.DeliveryResult) {
	relay := jsonString(nil, owner) // the same in every landed attempt
	for i, res := range results {
		if i >= len(p.at) {
			break
		}
		row := &p.rows[p.at[i]]
		row.status, row.attempt, row.outcome = res.Status, 1, string(res.Outcome)
		row.err, row.externalRef, row.dueAt = res.Error, res.ExternalRef, res.DueAt
		if res.Status != store.DeliveryStatusDelivered {
			p.journal = append(p.journal, journalRow{
				OutboxID: row.event.ID, Sink: row.sink, Outcome: string(res.Outcome), HTTPStatus: res.HTTPStatus,
				Error: res.Error, ExternalRef: res.ExternalRef, Duplicate: res.Duplicate,
				StartedAt: res.StartedAt, FinishedAt: res.FinishedAt, LatencyMS: res.FinishedAt.Sub(res.StartedAt).Milliseconds(),
			})
			continue
		}
		row.landed = landedJSON(relay, &res)
	}
}

// landedJSON is json.Marshal of the store.LandedAttempt of res by relay
// (relay: its name, JSON-encoded), byte for byte
// (TestLandedJSONIsTheLandedAttempt), without reflection: it is written
// for every event delivered at routing (docs/architecture.md, "Routing and
// deliveries").
func landedJSON(relay []byte, res *store.DeliveryResult) string {
	if !jsonTimeable(res.StartedAt) || !jsonTimeable(res.FinishedAt) {
		return "" // json.Marshal's error, which left the row without one
	}
	b := make([]byte, 0, 128+len(relay)+len(res.ExternalRef))
	b = append(b, `{"relay":`...)
	b = append(b, relay...)
	b = append(b, `,"external_ref":`...)
	b = jsonString(b, res.ExternalRef)
	b = append(b, `,"http_status":`...)
	b = strconv.AppendInt(b, int64(res.HTTPStatus), 10)
	b = append(b, `,"duplicate":`...)
	b = strconv.AppendBool(b, res.Duplicate)
	b = append(b, `,"started_at":`...)
	b = jsonTime(b, res.StartedAt)
	b = append(b, `,"finished_at":`...)
	b = jsonTime(b, res.FinishedAt)
	return string(append(b, '}'))
}

// jsonTimeable reports whether time.Time's MarshalJSON writes t: a year in
// [0, 9999] and a zone offset under 24 hours.
func jsonTimeable(t time.Time) bool {
	_, offset := t.Zone()
	return t.Year() >= 0 && t.Year() <= 9999 && offset > -24*3600 && offset < 24*3600
}

// jsonString appends s as encoding/json writes it: as is, quoted, when no
// byte of it needs an escape, else through json.Marshal.
func jsonString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// jsonTime appends t as time.Time's MarshalJSON writes it, for a year in
// [0, 9999] (landedJSON checks).
func jsonTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}
