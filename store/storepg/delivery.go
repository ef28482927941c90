package storepg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// OutboxRoute implements store.DeliveryStore. The transaction locks,
// without waiting, partitions of the outbox (by job) that no other routing
// holds and routes their oldest events (routeTx, routeBatch); when another
// routing holds every partition with events, this one routes nothing now
// and claims what is routed.
func (s *Store) OutboxRoute(ctx context.Context, params *store.OutboxRouteParams) (int, error) {
	routed := 0
	limit := params.PageLimit()
	err := s.routeTx(ctx, limit, 0, func(tx pgx.Tx) error {
		events, err := s.routeBatch(ctx, tx, limit)
		if err != nil || len(events) == 0 {
			return err
		}
		plan := &routePlan{events: events}
		for i := range events {
			e := &events[i].Outbox
			for _, sink := range params.Route(outboxFromRow(*e)) {
				plan.rows = append(plan.rows, routedRow{event: e, sink: sink, status: store.DeliveryStatusPending})
			}
		}
		routed = len(events)
		return plan.write(ctx, s, tx, "")
	})
	if err != nil {
		return 0, interpretError(err)
	}
	return routed, nil
}

// OutboxUnroutedList implements store.DeliveryStore.
func (s *Store) OutboxUnroutedList(ctx context.Context, params *store.OutboxUnroutedListParams) ([]*store.OutboxEvent, error) {
	rows, err := s.q.OutboxUnroutedList(ctx, s.pool, dbsqlc.OutboxUnroutedListParams{
		CreatedBefore: params.CreatedBefore,
		Max:           int64(params.PageLimit()),
	})
	return rowmap.Map(rows, err, interpretError, outboxFromRow)
}

// claimPlanSettings make the claim's plan the one its query is written
// for, whatever the table's statistics say: walk deliveries_due_idx in due
// order and stop at the limit. A freshly analyzed empty deliveries table,
// filled since, otherwise gets a plan that reads every pending delivery,
// checks each one's order, and sorts them (61 ms against 0.4 ms for a
// claim of 100 among 20,000 pending deliveries). Sent with the BEGIN, in
// one round trip.
const claimPlanSettings = `SELECT set_config('enable_seqscan', 'off', true),
	set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true)`

// DeliveryClaim implements store.DeliveryStore: the claim statement in a
// transaction whose planner settings fix its plan (claimPlanSettings, sent
// with its BEGIN).
func (s *Store) DeliveryClaim(ctx context.Context, params *store.DeliveryClaimParams) ([]*store.Delivery, error) {
	if params.Limit <= 0 || len(params.Sinks) == 0 {
		return nil, nil
	}
	var rows []dbsqlc.DeliveryClaimRow
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{BeginQuery: "BEGIN; " + claimPlanSettings}, func(tx pgx.Tx) error {
		var err error
		rows, err = s.q.DeliveryClaim(ctx, tx, dbsqlc.DeliveryClaimParams{
			Owner:         params.Owner,
			LeaseDuration: interval(params.LeaseDuration),
			Sinks:         params.Sinks,
			Max:           int64(min(params.Limit, 1<<31-1)),
		})
		return err
	})
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]*store.Delivery, len(rows))
	for i, r := range rows {
		d := deliveryFromRow(dbsqlc.Delivery{
			ID: r.ID, OutboxID: r.OutboxID, EventID: r.EventID, EventType: r.EventType, Sink: r.Sink,
			Tenant: r.Tenant, JobID: r.JobID, Status: r.Status, Attempt: r.Attempt, Attempts: r.Attempts,
			DueAt: r.DueAt, LeaseOwner: r.LeaseOwner, LastOutcome: r.LastOutcome, LastError: r.LastError,
			ExternalRef: r.ExternalRef, BudgetStartedAt: r.BudgetStartedAt, CreatedAt: r.CreatedAt,
			UpdatedAt: r.UpdatedAt, DeliveredAt: r.DeliveredAt,
		})
		d.Payload, d.EventCreatedAt = []byte(r.Payload), r.EventCreatedAt
		out[i] = d
	}
	return out, nil
}

// settleRow is one element of DeliverySettle's @results, read by
// jsonb_to_recordset.
type settleRow struct {
	DeliveryID  int64     `json:"delivery_id"`
	EventID     string    `json:"event_id"`
	Sink        string    `json:"sink"`
	Tenant      string    `json:"tenant"`
	Attempt     int32     `json:"attempt"`
	Outcome     string    `json:"outcome"`
	Status      string    `json:"status"`
	DueAt       time.Time `json:"due_at"`
	HTTPStatus  int32     `json:"http_status"`
	Error       string    `json:"error"`
	ExternalRef string    `json:"external_ref"`
	Duplicate   bool      `json:"duplicate"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
	LatencyMS   int64     `json:"latency_ms"`
}

// DeliverySettle implements store.DeliveryStore: one statement for the
// whole batch.
func (s *Store) DeliverySettle(ctx context.Context, params *store.DeliverySettleParams) (*store.DeliverySettleResult, error) {
	if len(params.Results) == 0 {
		return &store.DeliverySettleResult{}, nil
	}
	rows := make([]settleRow, len(params.Results))
	for i, r := range params.Results {
		rows[i] = settleRow{
			DeliveryID: r.DeliveryID, EventID: r.EventID, Sink: r.Sink, Tenant: r.Tenant,
			Attempt: r.Attempt, Outcome: string(r.Outcome), Status: string(r.Status), DueAt: r.DueAt,
			HTTPStatus: r.HTTPStatus, Error: r.Error, ExternalRef: r.ExternalRef, Duplicate: r.Duplicate,
			StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, LatencyMS: r.FinishedAt.Sub(r.StartedAt).Milliseconds(),
		}
	}
	results, err := json.Marshal(rows)
	if err != nil {
		return nil, fmt.Errorf("storepg: settle results: %w", err)
	}
	settled, err := s.q.DeliverySettle(ctx, s.pool, dbsqlc.DeliverySettleParams{Owner: params.Owner, Results: string(results)})
	if err != nil {
		return nil, interpretError(err)
	}
	return &store.DeliverySettleResult{LeaseLost: leaseLost(params.Results, settled)}, nil
}

// leaseLost lists the results whose delivery was not among those settled.
func leaseLost(results []store.DeliveryResult, settled []int64) []int64 {
	done := make(map[int64]bool, len(settled))
	for _, id := range settled {
		done[id] = true
	}
	var lost []int64
	for _, r := range results {
		if !done[r.DeliveryID] {
			lost = append(lost, r.DeliveryID)
		}
	}
	return lost
}

// DeliveryList implements store.DeliveryStore.
func (s *Store) DeliveryList(ctx context.Context, params *store.DeliveryListParams) (*store.DeliveryListResult, error) {
	limit := params.PageLimit()
	args := dbsqlc.DeliveryListParams{
		AllTenants:    params.AllTenants,
		Tenant:        params.Tenant,
		Status:        string(params.Status),
		Sink:          params.Sink,
		LastOutcome:   string(params.LastOutcome),
		CreatedBefore: params.CreatedBefore,
		AfterRank:     -1,
		Max:           int64(limit + 1),
	}
	if params.JobID != "" {
		id, err := parseUUID(params.JobID)
		if err != nil {
			return &store.DeliveryListResult{}, nil // no job has such an id
		}
		args.JobID = &id
	}
	if params.After != nil {
		args.AfterRank, args.AfterID = int64(params.After.Rank), params.After.ID
	}
	rows, err := s.q.DeliveryList(ctx, s.pool, args)
	return rowmap.Page(rows, err, interpretError, rowmap.Total(deliveryFromRow), limit, store.DeliveryListPage)
}

// DeliveryRetry implements store.DeliveryStore: store.DeliveryRetryParams.Retry
// in one transaction, the delivery of ID locked FOR UPDATE.
func (s *Store) DeliveryRetry(ctx context.Context, params *store.DeliveryRetryParams) (*store.DeliveryRetryResult, error) {
	var res *store.DeliveryRetryResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		res, err = params.Retry(store.DeliveryRetrySteps{
			Get: func() (*store.Delivery, error) {
				r, err := s.q.DeliveryGetForUpdate(ctx, tx, dbsqlc.DeliveryGetForUpdateParams{Tenant: params.Tenant, ID: params.ID})
				if err != nil {
					return nil, err
				}
				return deliveryFromRow(r), nil
			},
			Requeue: func() ([]*store.Delivery, error) {
				rows, err := s.q.DeliveryRequeue(ctx, tx, dbsqlc.DeliveryRequeueParams{Tenant: params.Tenant, ID: params.ID, Sink: params.Sink, Redeliver: params.Redeliver})
				return rowmap.Each(rows, deliveryFromRow), err
			},
			SinkEnable: func() (bool, error) {
				n, err := s.q.SinkEnable(ctx, tx, dbsqlc.SinkEnableParams{Tenant: params.Tenant, Sink: params.Sink})
				return n > 0, err
			},
		})
		return err
	})
	var refused *store.DeliveryRefusedError
	if errors.As(err, &refused) {
		return nil, err
	}
	if err != nil {
		return nil, interpretError(err)
	}
	return res, nil
}

// DeliveryAttemptList implements store.DeliveryStore: the journal rows,
// after the attempt recorded on the delivery when it landed at routing.
func (s *Store) DeliveryAttemptList(ctx context.Context, params *store.DeliveryAttemptListParams) ([]*store.DeliveryAttempt, error) {
	rows, err := s.q.DeliveryAttemptList(ctx, s.pool, params.DeliveryID)
	journal, err := rowmap.Map(rows, err, interpretError, func(r dbsqlc.DeliveryAttempt) *store.DeliveryAttempt {
		return columns.DeliveryAttempt(rowmap.DeliveryAttemptRow[time.Time](r))
	})
	if err != nil {
		return nil, err
	}
	d, err := s.q.DeliveryLanded(ctx, s.pool, params.DeliveryID)
	if errors.Is(err, pgx.ErrNoRows) {
		return journal, nil
	}
	if err != nil {
		return nil, interpretError(err)
	}
	return store.LandedJournal(&store.Delivery{ID: d.ID, EventID: d.EventID, Sink: d.Sink, Tenant: d.Tenant}, d.Landed, journal)
}

// SinkDisable implements store.DeliveryStore.
func (s *Store) SinkDisable(ctx context.Context, params *store.SinkDisableParams) error {
	return interpretError(s.q.SinkDisable(ctx, s.pool, dbsqlc.SinkDisableParams{Sink: params.Sink, Tenant: params.Tenant, Reason: params.Reason}))
}

// SentMessageGet implements store.DeliveryStore.
func (s *Store) SentMessageGet(ctx context.Context, params *store.SentMessageGetParams) (*store.SentMessage, error) {
	r, err := s.q.SentMessageGet(ctx, s.pool, dbsqlc.SentMessageGetParams{Sink: params.Sink, ContentHash: params.ContentHash, SentAfter: params.SentAfter})
	if err != nil {
		return nil, interpretError(err)
	}
	return &store.SentMessage{Sink: r.Sink, ContentHash: r.ContentHash, EventID: r.EventID, ExternalRef: r.ExternalRef, SentAt: r.SentAt}, nil
}

// SentMessageRecord implements store.DeliveryStore.
func (s *Store) SentMessageRecord(ctx context.Context, params *store.SentMessageRecordParams) error {
	m := params.Message
	return interpretError(s.q.SentMessageRecord(ctx, s.pool, dbsqlc.SentMessageRecordParams{
		Sink: m.Sink, ContentHash: m.ContentHash, EventID: m.EventID, ExternalRef: m.ExternalRef,
	}))
}

func outboxFromRow(r dbsqlc.Outbox) *store.OutboxEvent {
	return &store.OutboxEvent{
		ID: r.ID, EventID: r.EventID, Tenant: r.Tenant, JobID: r.JobID, Pipeline: r.Pipeline,
		EventType: r.EventType, Payload: []byte(r.Payload), CreatedAt: r.CreatedAt, RoutedAt: r.RoutedAt,
	}
}

func deliveryFromRow(r dbsqlc.Delivery) *store.Delivery {
	return columns.Delivery(rowmap.DeliveryRow[time.Time](r))
}
