package relay

import (
	"context"
	"time"

	"github.com/oncejob/oncejob/store"
)

// Sink delivers events to one external system. Deliver makes one attempt and
// says how it ended; it never blocks past its own timeout. A sink is used by
// many goroutines at once.
type Sink interface {
	Deliver(ctx context.Context, d *store.Delivery) Result
	Close() error
}

// BatchSink is a Sink that makes the attempts of many deliveries at once
// (JetStream: the publishes pipelined, the acks awaited together). The
// results are in the deliveries' order.
type BatchSink interface {
	Sink
	DeliverBatch(ctx context.Context, ds []*store.Delivery) []Result
}

// Result is how one attempt ended.
type Result struct {
	Outcome store.DeliveryOutcome
	// HTTPStatus, when the sink speaks HTTP and an answer came.
	HTTPStatus int
	// Err says why an attempt did not deliver.
	Err error
	// ExternalRef is the sink's reference of the landed effect: the
	// JetStream stream and sequence, the receiver's receipt header, the chat
	// message id.
	ExternalRef string
	// Duplicate: the sink already had the event (JetStream's ack says so).
	Duplicate bool
	// RetryAfter is the receiver's Retry-After; the next attempt waits at
	// least this long.
	RetryAfter time.Duration
}
