package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// DeliveryStore is what relays, the reconciler and the delivery RPCs need:
// the outbox routed into one delivery per subscribed sink, deliveries
// claimed under leases and settled fenced, the delivery journal, disabled
// sinks and the chat sink's sent messages.
//
// The outbox events themselves are written by the store in the transaction
// of the transition they announce (job.succeeded, job.failed,
// job.dead_lettered, job.cancelled, job.awaiting_approval,
// job.outcome_unknown), with an event id stable per (job, event type, the
// job's generation) and a payload fixed at that moment.
type DeliveryStore interface {
	// OutboxRoute makes the deliveries of up to Limit unrouted events, oldest
	// first — one pending delivery, due now, per sink Route returns for the
	// event — and marks the events routed, in one transaction. The events
	// of a job are routed by one routing transaction at a time (a caller
	// routes nothing another one holds; on Postgres routings of different
	// jobs run at once), so they are routed in the order they were written.
	// It returns how many events it routed; 0: none that no other routing
	// holds.
	OutboxRoute(ctx context.Context, params *OutboxRouteParams) (int, error)

	// OutboxUnroutedList returns unrouted events created before
	// CreatedBefore, oldest first (the reconciler's "undelivered").
	OutboxUnroutedList(ctx context.Context, params *OutboxUnroutedListParams) ([]*OutboxEvent, error)

	// DeliveryClaim claims up to Limit due deliveries of Sinks for Owner, in
	// one short transaction: pending ones whose due time has passed, which
	// includes those whose lease expired (a takeover), whose sink is not
	// disabled, and which no earlier pending delivery of the same job to the
	// same sink precedes (per job and sink, events go out in order). Each
	// claimed delivery gets lease_owner = Owner, attempt + 1 (the fencing
	// token), attempts + 1 (the budget) and a due time of now +
	// LeaseDuration. The deliveries come with their event's payload.
	DeliveryClaim(ctx context.Context, params *DeliveryClaimParams) ([]*Delivery, error)

	// DeliverySettle journals each result's attempt and moves its delivery
	// to the result's status, fenced: only while the delivery's
	// (lease_owner, attempt) still equal (Owner, result.Attempt) and it is
	// pending. The journal row is written either way — an attempt that
	// happened is a fact — but a result whose fence does not hold changes
	// nothing else and is listed in LeaseLost.
	DeliverySettle(ctx context.Context, params *DeliverySettleParams) (*DeliverySettleResult, error)

	// DeliveryList returns one page of deliveries: dead-lettered first, then
	// pending, then delivered; newest first within each.
	DeliveryList(ctx context.Context, params *DeliveryListParams) (*DeliveryListResult, error)

	// DeliveryRetry queues dead-lettered deliveries again, due now with a
	// fresh budget: one (ID), or every dead-lettered delivery of a sink
	// (Sink), which also enables the sink again if it was disabled. A
	// delivery already pending is returned as it is (nothing to do); a
	// delivered one, with ID, is a *DeliveryRefusedError unless Redeliver.
	// Another tenant's delivery is ErrNotFound.
	DeliveryRetry(ctx context.Context, params *DeliveryRetryParams) (*DeliveryRetryResult, error)

	// DeliveryAttemptList returns a delivery's journal, oldest first.
	DeliveryAttemptList(ctx context.Context, params *DeliveryAttemptListParams) ([]*DeliveryAttempt, error)

	// SinkDisable marks a sink disabled (its receiver answered 410 Gone):
	// its deliveries are not claimed until DeliveryRetry of the sink.
	// Disabling a disabled sink keeps its first reason.
	SinkDisable(ctx context.Context, params *SinkDisableParams) error

	// SinkStateList returns the disabled sinks of a tenant.
	SinkStateList(ctx context.Context, params *SinkStateListParams) ([]*SinkState, error)

	// SentMessageGet returns the message sent to Sink with ContentHash at or
	// after SentAfter, or ErrNotFound.
	SentMessageGet(ctx context.Context, params *SentMessageGetParams) (*SentMessage, error)

	// SentMessageRecord records a message sent to a sink, replacing an older
	// record of the same content hash.
	SentMessageRecord(ctx context.Context, params *SentMessageRecordParams) error
}

// Page limits of the delivery reads (see page.go).
const (
	OutboxRouteLimitDefault        = 500
	OutboxUnroutedListLimitDefault = 500
	DeliveryListLimitDefault       = 100
)

// PageLimit is the number of events one OutboxRoute routes at most.
func (p *OutboxRouteParams) PageLimit() int { return pageLimit(p.Limit, OutboxRouteLimitDefault) }

// PageLimit is the number of events OutboxUnroutedList returns at most.
func (p *OutboxUnroutedListParams) PageLimit() int {
	return pageLimit(p.Limit, OutboxUnroutedListLimitDefault)
}

// PageLimit is the page size DeliveryList returns at most.
func (p *DeliveryListParams) PageLimit() int { return pageLimit(p.Limit, DeliveryListLimitDefault) }

// DeliveryListPage makes the result of a DeliveryList read of up to limit+1
// deliveries in the list's order: the first limit are the page, and only
// when one beyond them was read is there a next page, after the page's last.
func DeliveryListPage(ds []*Delivery, limit int) *DeliveryListResult {
	page, last, more := pageOf(ds, limit)
	res := &DeliveryListResult{Deliveries: page}
	if more {
		res.Next = &DeliveryCursor{Rank: DeliveryRank(last.Status), ID: last.ID}
	}
	return res
}

// DeliveryStatus is where a delivery is. The string is what is stored.
type DeliveryStatus string

const (
	DeliveryStatusPending      DeliveryStatus = "pending"
	DeliveryStatusDelivered    DeliveryStatus = "delivered"
	DeliveryStatusDeadLettered DeliveryStatus = "dead_lettered"
)

// DeliveryOutcome is how one attempt ended, as journaled.
type DeliveryOutcome string

const (
	// The sink acknowledged the event (2xx, a publish ack, a chat post).
	DeliveryOutcomeDelivered DeliveryOutcome = "delivered"
	// The sink refused or could not be reached; the event did not land.
	DeliveryOutcomeFailed DeliveryOutcome = "failed"
	// The request was sent and no answer came (a timeout): it may have
	// landed. Retried with the same event id; never counted as failed.
	DeliveryOutcomeUnknown DeliveryOutcome = "unknown"
	// Refused for good (a 4xx other than 408, 429 and 410).
	DeliveryOutcomeDeadLettered DeliveryOutcome = "dead_lettered"
	// The receiver retired the endpoint (410 Gone); the sink is disabled.
	DeliveryOutcomeSinkDisabled DeliveryOutcome = "sink_disabled"
)

// Delivery is one event on its way to one sink.
type Delivery struct {
	ID          int64
	OutboxID    int64
	EventID     string
	EventType   string
	Sink        string
	Tenant      string
	JobID       string
	Status      DeliveryStatus
	Attempt     int32 // claims so far: the fencing token
	Attempts    int32 // attempts in the current budget
	DueAt       time.Time
	LeaseOwner  string
	LastOutcome DeliveryOutcome
	LastError   string
	ExternalRef string // the sink's reference of the landed effect
	// The retry budget's age counts from BudgetStartedAt (routing, or the
	// last DeliveryRetry).
	BudgetStartedAt time.Time
	CreatedAt       time.Time
	UpdatedAt       time.Time
	DeliveredAt     *time.Time
	// Payload is the event's envelope; DeliveryClaim loads it, DeliveryList
	// does not.
	Payload []byte
	// EventCreatedAt is when the event was written; DeliveryClaim loads it.
	EventCreatedAt time.Time
}

// DeliveryAttempt is one journaled attempt.
type DeliveryAttempt struct {
	ID          int64
	DeliveryID  int64
	EventID     string
	Sink        string
	Tenant      string
	Attempt     int32
	Relay       string
	Outcome     DeliveryOutcome
	HTTPStatus  int32
	Error       string
	ExternalRef string
	Duplicate   bool // the sink said it already had the event (JetStream)
	StartedAt   time.Time
	FinishedAt  time.Time
	LatencyMS   int64
}

// OutboxRouteParams routes a batch of the outbox.
type OutboxRouteParams struct {
	// Route returns the names of the sinks an event goes to; it is called
	// inside the routing transaction and must not block.
	Route func(e *OutboxEvent) []string
	// Limit caps the events routed; 0 means 500.
	Limit int
}

type OutboxUnroutedListParams struct {
	CreatedBefore time.Time
	// Limit caps the events returned; 0 means 500.
	Limit int
}

type DeliveryClaimParams struct {
	Owner string
	// Sinks are the sinks this relay can deliver to; deliveries of others
	// are left alone.
	Sinks         []string
	Limit         int
	LeaseDuration time.Duration
}

// DeliveryResult is one attempt's result and what it does to its delivery.
type DeliveryResult struct {
	DeliveryID int64
	EventID    string
	Sink       string
	Tenant     string
	Attempt    int32 // the fencing token the claim gave
	Outcome    DeliveryOutcome
	// Status is where the delivery goes: delivered, pending (due at DueAt)
	// or dead_lettered.
	Status      DeliveryStatus
	DueAt       time.Time
	HTTPStatus  int32
	Error       string
	ExternalRef string
	Duplicate   bool
	StartedAt   time.Time
	FinishedAt  time.Time
}

type DeliverySettleParams struct {
	Owner   string
	Results []DeliveryResult
}

type DeliverySettleResult struct {
	// LeaseLost are the deliveries another relay holds now: their attempt
	// was journaled and nothing else was written.
	LeaseLost []int64
}

// DeliveryCursor is a position in DeliveryList's order.
type DeliveryCursor struct {
	Rank int // 0 dead-lettered, 1 pending, 2 delivered
	ID   int64
}

// DeliveryRank is a status's place in DeliveryList's order.
func DeliveryRank(s DeliveryStatus) int {
	switch s {
	case DeliveryStatusDeadLettered:
		return 0
	case DeliveryStatusPending:
		return 1
	}
	return 2
}

type DeliveryListParams struct {
	// Tenant scopes the list; AllTenants lists every tenant's (the
	// reconciler) and is never set on behalf of a client.
	Tenant     string
	AllTenants bool
	JobID      string         // empty: any
	Status     DeliveryStatus // empty: any
	Sink       string         // empty: any
	// LastOutcome, when set, keeps deliveries whose last attempt ended so.
	LastOutcome DeliveryOutcome
	// CreatedBefore, when set, keeps deliveries created before it.
	CreatedBefore *time.Time
	// Limit caps the page; 0 means 100.
	Limit int
	After *DeliveryCursor
}

type DeliveryListResult struct {
	Deliveries []*Delivery
	Next       *DeliveryCursor // nil on the last page
}

type DeliveryRetryParams struct {
	Tenant string
	ID     int64  // one delivery; or
	Sink   string // every dead-lettered delivery of the sink
	// Redeliver, with ID, queues a delivered delivery too: the reconciler
	// found that the target system lost it. Never set for a client.
	Redeliver bool
}

type DeliveryRetryResult struct {
	// Deliveries are those queued again (with ID: the delivery as it is
	// now, queued or already pending).
	Deliveries []*Delivery
	// SinkEnabled: the sink was disabled and is enabled again.
	SinkEnabled bool
}

// DeliveryRetrySteps are the statements of one DeliveryRetry, each run by
// the store inside the one transaction that DeliveryRetryParams.Retry runs
// in. Their errors come back from Retry as they are.
type DeliveryRetrySteps struct {
	// Get reads the delivery of ID, locked against a concurrent change
	// until the transaction ends.
	Get func() (*Delivery, error)
	// Requeue queues the params' dead-lettered deliveries (with ID and
	// Redeliver: a delivered one too) due now, and returns them.
	Requeue func() ([]*Delivery, error)
	// SinkEnable enables the params' sink and says whether it was disabled.
	SinkEnable func() (bool, error)
}

// Retry is the rule of DeliveryRetry, over the steps of one store: exactly
// one of ID and Sink; a delivery by ID that is delivered is refused (unless
// Redeliver), one that is pending is answered as it is and nothing written;
// otherwise the deliveries are queued again, and a retry of a sink enables
// it.
func (p *DeliveryRetryParams) Retry(steps DeliveryRetrySteps) (*DeliveryRetryResult, error) {
	if (p.ID == 0) == (p.Sink == "") {
		return nil, errors.New("store: DeliveryRetry needs exactly one of ID and Sink")
	}
	if p.ID != 0 {
		current, err := steps.Get()
		if err != nil {
			return nil, err
		}
		switch current.Status {
		case DeliveryStatusDelivered:
			if !p.Redeliver {
				return nil, &DeliveryRefusedError{Status: DeliveryStatusDelivered}
			}
		case DeliveryStatusPending:
			return &DeliveryRetryResult{Deliveries: []*Delivery{current}}, nil
		}
	}
	ds, err := steps.Requeue()
	if err != nil {
		return nil, err
	}
	res := &DeliveryRetryResult{Deliveries: ds}
	if p.Sink != "" {
		if res.SinkEnabled, err = steps.SinkEnable(); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// DeliveryRefusedError: a delivered delivery cannot be retried.
type DeliveryRefusedError struct {
	Status DeliveryStatus
}

func (e *DeliveryRefusedError) Error() string {
	return "delivery is " + string(e.Status) + ": only a dead-lettered delivery is retried"
}

func (e *DeliveryRefusedError) Is(target error) bool { return target == ErrTransitionRefused }

type DeliveryAttemptListParams struct {
	DeliveryID int64
}

// SinkState is a disabled sink.
type SinkState struct {
	Sink       string
	Tenant     string
	DisabledAt time.Time
	Reason     string
}

type SinkDisableParams struct {
	Sink   string
	Tenant string
	Reason string
}

type SinkStateListParams struct {
	Tenant string
}

// SentMessage is one message the chat sink posted.
type SentMessage struct {
	Sink        string
	ContentHash string
	EventID     string
	ExternalRef string
	SentAt      time.Time
}

type SentMessageGetParams struct {
	Sink        string
	ContentHash string
	SentAfter   time.Time
}

type SentMessageRecordParams struct {
	Message SentMessage
}

// OutboxDeliverer is a DeliveryStore that can route and deliver in one
// write: it makes the first attempt of the deliveries a routing makes
// before their rows exist, inside the routing transaction (which holds the
// routing lock of the events' jobs, so no other relay routes or sends those
// events meanwhile),
// and then writes each delivery once, in the status its attempt left it.
// A delivered event so costs two row writes (the outbox row marked routed,
// the delivery inserted delivered) instead of five. A relay that dies
// before the commit leaves the events unrouted: the next routing sends them
// again with the same event ids. The Postgres store is one; the SQLite
// store, whose one writer the send would hold, is not.
type OutboxDeliverer interface {
	OutboxRouteDeliver(ctx context.Context, params *OutboxRouteDeliverParams) (int, error)
}

// OutboxRouteDeliverParams routes a batch of the outbox and delivers what
// can be delivered at once.
type OutboxRouteDeliverParams struct {
	Owner string
	// Route returns the names of the sinks an event goes to.
	Route func(e *OutboxEvent) []string
	// Direct says whether a sink's deliveries may be attempted at routing:
	// the sink honours an idempotency key, so a send whose routing does not
	// commit is harmless when made again.
	Direct func(sink string) bool
	// Deliver makes one attempt of each delivery (ID 0, Attempt 1, Payload
	// loaded) and returns a result for each, in order. It runs inside the
	// routing transaction; ctx ends at the transaction's deadline.
	Deliver func(ctx context.Context, ds []*Delivery) []DeliveryResult
	// Limit caps the events routed; 0 means 500.
	Limit int
	// Hold bounds how long the routing transaction stays open (the sends
	// included); the store aborts it past that. 0 means 30s.
	Hold time.Duration
}

// PageLimit is the number of events one OutboxRouteDeliver routes at most.
func (p *OutboxRouteDeliverParams) PageLimit() int {
	return pageLimit(p.Limit, OutboxRouteLimitDefault)
}

// LandedAttempt is the attempt that landed a delivery at its routing,
// recorded on the delivery (its landed column) instead of in the journal.
type LandedAttempt struct {
	Relay       string    `json:"relay"`
	ExternalRef string    `json:"external_ref"`
	HTTPStatus  int32     `json:"http_status"`
	Duplicate   bool      `json:"duplicate"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
}

// LandedJournal returns journal with the attempt recorded in landed (a
// delivery's landed column, JSON; "" none) put first: it is always the
// delivery's first attempt.
func LandedJournal(d *Delivery, landed string, journal []*DeliveryAttempt) ([]*DeliveryAttempt, error) {
	if landed == "" {
		return journal, nil
	}
	var l LandedAttempt
	if err := json.Unmarshal([]byte(landed), &l); err != nil {
		return nil, fmt.Errorf("store: delivery %d: landed attempt: %w", d.ID, err)
	}
	a := &DeliveryAttempt{
		DeliveryID: d.ID, EventID: d.EventID, Sink: d.Sink, Tenant: d.Tenant, Attempt: 1, Relay: l.Relay,
		Outcome: DeliveryOutcomeDelivered, HTTPStatus: l.HTTPStatus, ExternalRef: l.ExternalRef,
		Duplicate: l.Duplicate, StartedAt: l.StartedAt, FinishedAt: l.FinishedAt,
		LatencyMS: l.FinishedAt.Sub(l.StartedAt).Milliseconds(),
	}
	return append([]*DeliveryAttempt{a}, journal...), nil
}
