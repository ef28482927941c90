package storesqlite

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// The single writer makes routing one-at-a-time and claims exclusive without
// locks of their own (see internal/dbsqlite/delivery.sql).

// OutboxRoute implements store.DeliveryStore: the batch's deliveries in one
// statement, its events marked routed in another.
func (s *Store) OutboxRoute(ctx context.Context, params *store.OutboxRouteParams) (int, error) {
	routed := 0
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		rows, err := s.q.OutboxUnroutedBatch(ctx, tx, int64(params.PageLimit()))
		if err != nil || len(rows) == 0 {
			return interpretError(err)
		}
		ids := make([]any, len(rows))
		var pairs [][2]any
		for i, r := range rows {
			ids[i] = r.ID
			for _, sink := range params.Route(outboxFromRow(r)) {
				pairs = append(pairs, [2]any{r.ID, sink})
			}
		}
		if len(pairs) > 0 {
			if err := s.q.DeliveryInsertMany(ctx, tx, dbsqlite.DeliveryInsertManyParams{Now: now, Pairs: jsonOf(pairs)}); err != nil {
				return interpretError(err)
			}
		}
		routed = len(rows)
		return interpretError(s.q.OutboxMarkRoutedMany(ctx, tx, dbsqlite.OutboxMarkRoutedManyParams{Now: &now, Ids: jsonOf(ids)}))
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

// DeliveryClaim implements store.DeliveryStore: the candidates, their claim
// and their events' payloads, three statements whatever the batch.
func (s *Store) DeliveryClaim(ctx context.Context, params *store.DeliveryClaimParams) ([]*store.Delivery, error) {
	if params.Limit <= 0 || len(params.Sinks) == 0 {
		return nil, nil
	}
	var out []*store.Delivery
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		out = nil
		ids, err := s.q.DeliveryClaimCandidates(ctx, tx, dbsqlite.DeliveryClaimCandidatesParams{
			Now: now, Sinks: jsonList(params.Sinks), Max: int64(params.Limit),
		})
		if err != nil || len(ids) == 0 {
			return interpretError(err)
		}
		rows, err := s.q.DeliveryClaimMany(ctx, tx, dbsqlite.DeliveryClaimManyParams{
			Owner: &params.Owner, LeaseUntil: now + params.LeaseDuration.Microseconds(), Now: now, Ids: jsonOf(ids),
		})
		if err != nil {
			return interpretError(err)
		}
		outboxIDs := make([]int64, len(rows))
		for i, r := range rows {
			outboxIDs[i] = r.OutboxID
		}
		events, err := s.q.OutboxPayloads(ctx, tx, jsonOf(outboxIDs))
		if err != nil {
			return interpretError(err)
		}
		out = claimedInOrder(ids, rows, events)
		return nil
	})
	return out, err
}

// claimedInOrder is the claimed deliveries with their events' payloads, in
// the candidates' (due) order.
func claimedInOrder(ids []int64, rows []dbsqlite.Delivery, events []dbsqlite.OutboxPayloadsRow) []*store.Delivery {
	byEvent := make(map[int64]dbsqlite.OutboxPayloadsRow, len(events))
	for _, e := range events {
		byEvent[e.ID] = e
	}
	byID := make(map[int64]*store.Delivery, len(rows))
	for _, r := range rows {
		d := deliveryFromRow(r)
		e := byEvent[r.OutboxID]
		d.Payload, d.EventCreatedAt = []byte(e.Payload), timeFrom(e.CreatedAt)
		byID[r.ID] = d
	}
	out := make([]*store.Delivery, 0, len(rows))
	for _, id := range ids {
		if d, ok := byID[id]; ok {
			out = append(out, d)
		}
	}
	return out
}

// DeliverySettle implements store.DeliveryStore: the batch in one write
// transaction, its journal in one statement.
func (s *Store) DeliverySettle(ctx context.Context, params *store.DeliverySettleParams) (*store.DeliverySettleResult, error) {
	res := &store.DeliverySettleResult{}
	journal := make([][13]any, len(params.Results))
	for i, r := range params.Results {
		journal[i] = [13]any{r.DeliveryID, r.EventID, r.Sink, r.Tenant, r.Attempt, string(r.Outcome), r.HTTPStatus,
			r.Error, r.ExternalRef, r.Duplicate, r.StartedAt.UnixMicro(), r.FinishedAt.UnixMicro(),
			r.FinishedAt.Sub(r.StartedAt).Milliseconds()}
	}
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		res.LeaseLost = nil
		if err := s.q.DeliveryAttemptInsertMany(ctx, tx, dbsqlite.DeliveryAttemptInsertManyParams{Relay: params.Owner, Results: jsonOf(journal)}); err != nil {
			return interpretError(err)
		}
		for _, r := range params.Results {
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
