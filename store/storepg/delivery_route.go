package storepg

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// routedRow is one element of DeliveryInsertRouted's @rows, read by
// jsonb_to_recordset.
type routedRow struct {
	OutboxID    int64      `json:"outbox_id"`
	Sink        string     `json:"sink"`
	Status      string     `json:"status"`
	Attempt     int32      `json:"attempt"`
	DueAt       *time.Time `json:"due_at"`
	Outcome     string     `json:"outcome"`
	Error       string     `json:"error"`
	ExternalRef string     `json:"external_ref"`
	Landed      string     `json:"landed"`
	Journal     bool       `json:"journal"`
	HTTPStatus  int32      `json:"http_status"`
	Duplicate   bool       `json:"duplicate"`
	StartedAt   *time.Time `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	LatencyMS   int64      `json:"latency_ms"`
}

// routePlan is a routing's deliveries: rows in outbox order, and the ones
// attempted at routing (direct[i] is rows[at[i]]).
type routePlan struct {
	rows   []routedRow
	direct []*store.Delivery
	at     []int
}

// OutboxRouteDeliver implements store.OutboxDeliverer. The transaction takes
// the routing lock as OutboxRoute does, reads the batch, attempts the
// deliveries that may go at once - a direct sink's, not disabled, with no
// pending delivery of the same job and sink before it (in the table or
// earlier in the batch) - then writes every delivery once and marks the
// events routed. The transaction ends after params.Hold at the latest (its
// session too, should the relay stop answering), so a stuck relay does not
// hold the lock.
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
	err := pgx.BeginFunc(txCtx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(txCtx, fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d", (hold+time.Second).Milliseconds())); err != nil {
			return err
		}
		locked, err := s.q.OutboxRouteLock(txCtx, tx)
		if err != nil || !locked {
			return err
		}
		events, err := s.q.OutboxUnroutedBatch(txCtx, tx, int64(params.PageLimit()))
		if err != nil || len(events) == 0 {
			return err
		}
		plan, err := s.planRoute(txCtx, tx, params, events)
		if err != nil {
			return err
		}
		if len(plan.direct) > 0 {
			plan.settle(params.Owner, params.Deliver(sendCtx, plan.direct))
		}
		if len(plan.rows) > 0 {
			rows, err := json.Marshal(plan.rows)
			if err != nil {
				return fmt.Errorf("storepg: routed deliveries: %w", err)
			}
			if err := s.q.DeliveryInsertRouted(txCtx, tx, dbsqlc.DeliveryInsertRoutedParams{Owner: params.Owner, Rows: string(rows)}); err != nil {
				return err
			}
		}
		ids := make([]int64, len(events))
		for i, e := range events {
			ids[i] = e.ID
		}
		routed = len(events)
		return s.q.OutboxMarkRouted(txCtx, tx, ids)
	})
	if err != nil {
		return 0, interpretError(err)
	}
	return routed, nil
}

// planRoute makes the routing's deliveries, pending and due now, and picks
// those attempted at routing.
func (s *Store) planRoute(ctx context.Context, tx pgx.Tx, params *store.OutboxRouteDeliverParams, events []dbsqlc.Outbox) (*routePlan, error) {
	plan := &routePlan{}
	sinksOf := make([][]string, len(events))
	outs := make([]*store.OutboxEvent, len(events))
	var jobs []string
	var direct []string
	for i, e := range events {
		outs[i] = outboxFromRow(e)
		sinksOf[i] = params.Route(outs[i])
		for _, sink := range sinksOf[i] {
			if params.Direct(sink) && !slices.Contains(direct, sink) {
				direct = append(direct, sink)
			}
		}
		jobs = append(jobs, e.JobID)
	}
	blocked := map[string]bool{}
	if len(direct) > 0 {
		disabled, err := s.q.SinkDisabledList(ctx, tx, direct)
		if err != nil {
			return nil, err
		}
		direct = slices.DeleteFunc(direct, func(s string) bool { return slices.Contains(disabled, s) })
		pairs, err := s.q.DeliveryPendingPairs(ctx, tx, dbsqlc.DeliveryPendingPairsParams{JobIds: jobs, Sinks: direct})
		if err != nil {
			return nil, err
		}
		for _, p := range pairs {
			blocked[p.JobID+"\x00"+p.Sink] = true
		}
	}
	now := time.Now()
	for i, e := range events {
		for _, sink := range sinksOf[i] {
			key := e.JobID + "\x00" + sink
			plan.rows = append(plan.rows, routedRow{OutboxID: e.ID, Sink: sink, Status: string(store.DeliveryStatusPending)})
			wait := blocked[key] || !slices.Contains(direct, sink)
			blocked[key] = true // a later event of the job waits for this one
			if wait {
				continue
			}
			plan.at = append(plan.at, len(plan.rows)-1)
			plan.direct = append(plan.direct, &store.Delivery{
				OutboxID: e.ID, EventID: e.EventID, EventType: e.EventType, Sink: sink, Tenant: e.Tenant,
				JobID: outs[i].JobID, Status: store.DeliveryStatusPending, Attempt: 1, Attempts: 1,
				BudgetStartedAt: now, CreatedAt: now, UpdatedAt: now, Payload: []byte(e.Payload), EventCreatedAt: e.CreatedAt,
			})
		}
	}
	return plan, nil
}

// settle writes the routing attempts' results into their rows: a landed
// attempt is recorded on the row, any other is journaled.
func (p *routePlan) settle(owner string, results []store.DeliveryResult) {
	for i, res := range results {
		if i >= len(p.at) {
			break
		}
		row := &p.rows[p.at[i]]
		row.Status, row.Attempt, row.Outcome = string(res.Status), 1, string(res.Outcome)
		row.Error, row.ExternalRef, row.HTTPStatus, row.Duplicate = res.Error, res.ExternalRef, res.HTTPStatus, res.Duplicate
		row.StartedAt, row.FinishedAt = &res.StartedAt, &res.FinishedAt
		row.LatencyMS = res.FinishedAt.Sub(res.StartedAt).Milliseconds()
		if res.Status == store.DeliveryStatusPending {
			row.DueAt = &res.DueAt
		}
		if res.Status != store.DeliveryStatusDelivered {
			row.Journal = true
			continue
		}
		landed, _ := json.Marshal(store.LandedAttempt{
			Relay: owner, ExternalRef: res.ExternalRef, HTTPStatus: res.HTTPStatus, Duplicate: res.Duplicate,
			StartedAt: res.StartedAt, FinishedAt: res.FinishedAt,
		})
		row.Landed = string(landed)
	}
}
