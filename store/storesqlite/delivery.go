package storesqlite

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// The single writer makes routing one-at-a-time and claims exclusive without
// locks of their own (see internal/dbsqlite/delivery.sql).

// OutboxRoute implements store.DeliveryStore.
func (s *Store) OutboxRoute(ctx context.Context, params *store.OutboxRouteParams) (int, error) {
	routed := 0
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		rows, err := s.q.OutboxUnroutedBatch(ctx, tx, int64(params.PageLimit()))
		if err != nil {
			return interpretError(err)
		}
		for _, r := range rows {
			for _, sink := range params.Route(outboxFromRow(r)) {
				if err := s.q.DeliveryInsert(ctx, tx, dbsqlite.DeliveryInsertParams{Sink: sink, Now: now, OutboxID: r.ID}); err != nil {
					return interpretError(err)
				}
			}
			if err := s.q.OutboxMarkRouted(ctx, tx, dbsqlite.OutboxMarkRoutedParams{Now: &now, ID: r.ID}); err != nil {
				return interpretError(err)
			}
		}
		routed = len(rows)
		return nil
	})
	return routed, err
}

// OutboxUnroutedList implements store.DeliveryStore.
func (s *Store) OutboxUnroutedList(ctx context.Context, params *store.OutboxUnroutedListParams) ([]*store.OutboxEvent, error) {
	rows, err := s.q.OutboxUnroutedList(ctx, s.read, dbsqlite.OutboxUnroutedListParams{
		CreatedBefore: params.CreatedBefore.UnixMicro(),
		Max:           int64(params.PageLimit()),
	})
	return rowmap.Map(rows, err, interpretError, outboxFromRow)
}

// DeliveryClaim implements store.DeliveryStore.
func (s *Store) DeliveryClaim(ctx context.Context, params *store.DeliveryClaimParams) ([]*store.Delivery, error) {
	if params.Limit <= 0 || len(params.Sinks) == 0 {
		return nil, nil
	}
	var out []*store.Delivery
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		ids, err := s.q.DeliveryClaimCandidates(ctx, tx, dbsqlite.DeliveryClaimCandidatesParams{
			Now: now, Sinks: jsonList(params.Sinks), Max: int64(params.Limit),
		})
		if err != nil {
			return interpretError(err)
		}
		for _, id := range ids {
			row, err := s.q.DeliveryClaim(ctx, tx, dbsqlite.DeliveryClaimParams{
				Owner: &params.Owner, LeaseUntil: now + params.LeaseDuration.Microseconds(), Now: now, ID: id,
			})
			if err != nil {
				return interpretError(err)
			}
			event, err := s.q.OutboxPayload(ctx, tx, row.OutboxID)
			if err != nil {
				return interpretError(err)
			}
			d := deliveryFromRow(row)
			d.Payload, d.EventCreatedAt = []byte(event.Payload), timeFrom(event.CreatedAt)
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// DeliverySettle implements store.DeliveryStore: the batch in one write
// transaction.
func (s *Store) DeliverySettle(ctx context.Context, params *store.DeliverySettleParams) (*store.DeliverySettleResult, error) {
	res := &store.DeliverySettleResult{}
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		res.LeaseLost = nil
		for _, r := range params.Results {
			err := s.q.DeliveryAttemptInsert(ctx, tx, dbsqlite.DeliveryAttemptInsertParams{
				DeliveryID: r.DeliveryID, EventID: r.EventID, Sink: r.Sink, Tenant: r.Tenant,
				Attempt: int64(r.Attempt), Relay: params.Owner, Outcome: string(r.Outcome),
				HttpStatus: int64(r.HTTPStatus), Error: r.Error, ExternalRef: r.ExternalRef,
				Duplicate: r.Duplicate, StartedAt: r.StartedAt.UnixMicro(),
				FinishedAt: r.FinishedAt.UnixMicro(), LatencyMs: r.FinishedAt.Sub(r.StartedAt).Milliseconds(),
			})
			if err != nil {
				return interpretError(err)
			}
			n, err := s.q.DeliverySettle(ctx, tx, dbsqlite.DeliverySettleParams{
				Status: string(r.Status), DueAt: r.DueAt.UnixMicro(), Outcome: string(r.Outcome),
				Error: r.Error, ExternalRef: r.ExternalRef, Now: now, ID: r.DeliveryID,
				Owner: &params.Owner, Attempt: int64(r.Attempt),
			})
			if err != nil {
				return interpretError(err)
			}
			if n == 0 {
				res.LeaseLost = append(res.LeaseLost, r.DeliveryID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// DeliveryList implements store.DeliveryStore.
func (s *Store) DeliveryList(ctx context.Context, params *store.DeliveryListParams) (*store.DeliveryListResult, error) {
	limit := params.PageLimit()
	args := dbsqlite.DeliveryListParams{
		AllTenants:  params.AllTenants,
		Tenant:      params.Tenant,
		JobID:       params.JobID,
		Status:      string(params.Status),
		Sink:        params.Sink,
		LastOutcome: string(params.LastOutcome),
		AfterRank:   -1,
		Max:         int64(limit + 1),
	}
	if params.JobID != "" {
		id, ok := canonicalUUID(params.JobID)
		if !ok {
			return &store.DeliveryListResult{}, nil
		}
		args.JobID = id
	}
	if params.CreatedBefore != nil {
		args.CreatedBefore = params.CreatedBefore.UnixMicro()
	}
	if params.After != nil {
		args.AfterRank, args.AfterID = int64(params.After.Rank), params.After.ID
	}
	rows, err := s.q.DeliveryList(ctx, s.read, args)
	return rowmap.Page(rows, err, interpretError, rowmap.Total(deliveryFromRow), limit, store.DeliveryListPage)
}

// DeliveryRetry implements store.DeliveryStore: store.DeliveryRetryParams.Retry
// in one write transaction.
func (s *Store) DeliveryRetry(ctx context.Context, params *store.DeliveryRetryParams) (*store.DeliveryRetryResult, error) {
	var res *store.DeliveryRetryResult
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		var err error
		res, err = params.Retry(store.DeliveryRetrySteps{
			Get: func() (*store.Delivery, error) {
				r, err := s.q.DeliveryGet(ctx, tx, dbsqlite.DeliveryGetParams{Tenant: params.Tenant, ID: params.ID})
				return rowmap.One(r, err, interpretError, deliveryFromRow)
			},
			Requeue: func() ([]*store.Delivery, error) {
				rows, err := s.q.DeliveryRequeue(ctx, tx, dbsqlite.DeliveryRequeueParams{Now: now, Tenant: params.Tenant, ID: params.ID, Sink: params.Sink, Redeliver: params.Redeliver})
				return rowmap.Each(rows, deliveryFromRow), interpretError(err)
			},
			SinkEnable: func() (bool, error) {
				n, err := s.q.SinkEnable(ctx, tx, dbsqlite.SinkEnableParams{Tenant: params.Tenant, Sink: params.Sink})
				return n > 0, interpretError(err)
			},
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// DeliveryAttemptList implements store.DeliveryStore.
func (s *Store) DeliveryAttemptList(ctx context.Context, params *store.DeliveryAttemptListParams) ([]*store.DeliveryAttempt, error) {
	rows, err := s.q.DeliveryAttemptList(ctx, s.read, params.DeliveryID)
	return rowmap.Map(rows, err, interpretError, func(r dbsqlite.DeliveryAttempt) *store.DeliveryAttempt {
		return columns.DeliveryAttempt(rowmap.DeliveryAttemptRow[int64](r))
	})
}

// SinkDisable implements store.DeliveryStore.
func (s *Store) SinkDisable(ctx context.Context, params *store.SinkDisableParams) error {
	return s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		return interpretError(s.q.SinkDisable(ctx, tx, dbsqlite.SinkDisableParams{Sink: params.Sink, Tenant: params.Tenant, Now: now, Reason: params.Reason}))
	})
}

// SentMessageGet implements store.DeliveryStore.
func (s *Store) SentMessageGet(ctx context.Context, params *store.SentMessageGetParams) (*store.SentMessage, error) {
	r, err := s.q.SentMessageGet(ctx, s.read, dbsqlite.SentMessageGetParams{Sink: params.Sink, ContentHash: params.ContentHash, SentAfter: params.SentAfter.UnixMicro()})
	if err != nil {
		return nil, interpretError(err)
	}
	return &store.SentMessage{Sink: r.Sink, ContentHash: r.ContentHash, EventID: r.EventID, ExternalRef: r.ExternalRef, SentAt: timeFrom(r.SentAt)}, nil
}

// SentMessageRecord implements store.DeliveryStore.
func (s *Store) SentMessageRecord(ctx context.Context, params *store.SentMessageRecordParams) error {
	m := params.Message
	return s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		return interpretError(s.q.SentMessageRecord(ctx, tx, dbsqlite.SentMessageRecordParams{
			Sink: m.Sink, ContentHash: m.ContentHash, EventID: m.EventID, ExternalRef: m.ExternalRef, Now: now,
		}))
	})
}

func outboxFromRow(r dbsqlite.Outbox) *store.OutboxEvent {
	return &store.OutboxEvent{
		ID: r.ID, EventID: r.EventID, Tenant: r.Tenant, JobID: r.JobID, Pipeline: r.Pipeline,
		EventType: r.EventType, Payload: []byte(r.Payload), CreatedAt: timeFrom(r.CreatedAt),
		RoutedAt: columns.NullTime(r.RoutedAt),
	}
}

func deliveryFromRow(r dbsqlite.Delivery) *store.Delivery {
	return columns.Delivery(rowmap.DeliveryRow[int64](r))
}
