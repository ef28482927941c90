package relay

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/oncejob/oncejob/store"
)

// ReconcileOptions bound a reconciliation pass.
type ReconcileOptions struct {
	// Threshold: an event unrouted, or a delivery still pending, this long
	// after it was made is overdue; default 5m.
	Threshold time.Duration
	// Since: JetStream deliveries made within this are checked against the
	// stream; default 24h.
	Since time.Duration
	// Limit caps what one pass reads of each kind; default 10,000.
	Limit int
	// DryRun reports a lost JetStream message without queueing it again.
	DryRun bool
}

func (o ReconcileOptions) withDefaults() ReconcileOptions {
	if o.Threshold == 0 {
		o.Threshold = 5 * time.Minute
	}
	if o.Since == 0 {
		o.Since = 24 * time.Hour
	}
	if o.Limit == 0 {
		o.Limit = 10_000
	}
	return o
}

// Report is what a reconciliation found.
type Report struct {
	// Unrouted events older than the threshold: no relay is running, or
	// routing fails.
	Unrouted []*store.OutboxEvent `json:"unrouted"`
	// Overdue deliveries: pending longer than the threshold.
	Overdue []*store.Delivery `json:"overdue"`
	// Unknown: deliveries whose last attempt's outcome is unknown (sent, no
	// answer); the receiver may have the event. Pending ones are retried
	// with the same id; dead-lettered ones wait for RetryDelivery.
	Unknown []*store.Delivery `json:"unknown"`
	// DeadLettered deliveries, waiting for RetryDelivery.
	DeadLettered []*store.Delivery `json:"dead_lettered"`
	// Lost: deliveries the journal calls delivered to a JetStream stream
	// that the stream does not hold. Each is queued again (Requeued) with
	// the same event id unless DryRun.
	Lost     []*store.Delivery `json:"lost"`
	Requeued int               `json:"requeued"`
	// Checked is how many JetStream deliveries were compared with their
	// stream.
	Checked int `json:"checked"`
}

// OK reports whether nothing is off.
func (r *Report) OK() bool {
	return len(r.Unrouted) == 0 && len(r.Overdue) == 0 && len(r.Unknown) == 0 && len(r.DeadLettered) == 0 && len(r.Lost) == 0
}

// Summary is one human line per finding.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "unrouted events past the threshold: %d\n", len(r.Unrouted))
	fmt.Fprintf(&b, "deliveries pending past the threshold: %d\n", len(r.Overdue))
	fmt.Fprintf(&b, "deliveries with an unknown outcome: %d\n", len(r.Unknown))
	fmt.Fprintf(&b, "dead-lettered deliveries: %d\n", len(r.DeadLettered))
	fmt.Fprintf(&b, "JetStream deliveries checked against their stream: %d; lost by the stream: %d; queued again: %d\n", r.Checked, len(r.Lost), r.Requeued)
	for _, d := range r.Lost {
		fmt.Fprintf(&b, "  lost: delivery %d event %s sink %s (journal says %s)\n", d.ID, d.EventID, d.Sink, d.ExternalRef)
	}
	for _, d := range r.DeadLettered {
		fmt.Fprintf(&b, "  dead letter: delivery %d event %s sink %s: %s\n", d.ID, d.EventID, d.Sink, d.LastError)
	}
	return b.String()
}

// Reconcile compares the delivery journal with what should have happened
// and with the JetStream streams, and repairs what it can: a message a
// stream lost is queued again under its event id. It reports, and never
// guesses: an unknown outcome is reported, not settled.
func Reconcile(ctx context.Context, st Store, sinks *Sinks, opts ReconcileOptions) (*Report, error) {
	opts = opts.withDefaults()
	rep := &Report{}
	cutoff := time.Now().Add(-opts.Threshold)
	var err error
	if rep.Unrouted, err = st.OutboxUnroutedList(ctx, &store.OutboxUnroutedListParams{CreatedBefore: cutoff, Limit: opts.Limit}); err != nil {
		return nil, err
	}
	if rep.Overdue, err = listAll(ctx, st, store.DeliveryListParams{Status: store.DeliveryStatusPending, CreatedBefore: &cutoff}, opts.Limit); err != nil {
		return nil, err
	}
	if rep.Unknown, err = listAll(ctx, st, store.DeliveryListParams{LastOutcome: store.DeliveryOutcomeUnknown}, opts.Limit); err != nil {
		return nil, err
	}
	if rep.DeadLettered, err = listAll(ctx, st, store.DeliveryListParams{Status: store.DeliveryStatusDeadLettered}, opts.Limit); err != nil {
		return nil, err
	}
	for _, name := range sinks.Names() {
		js, ok := sinks.byName[name].sink.(*jetStreamSink)
		if !ok {
			continue
		}
		if err := reconcileStream(ctx, st, name, js, opts, rep); err != nil {
			return nil, fmt.Errorf("sink %s: %w", name, err)
		}
	}
	return rep, nil
}

func reconcileStream(ctx context.Context, st Store, name string, js *jetStreamSink, opts ReconcileOptions, rep *Report) error {
	since := time.Now().Add(-opts.Since)
	delivered, err := listAll(ctx, st, store.DeliveryListParams{Sink: name, Status: store.DeliveryStatusDelivered}, opts.Limit)
	if err != nil {
		return err
	}
	for _, d := range delivered {
		if d.CreatedAt.Before(since) {
			continue
		}
		rep.Checked++
		held, err := js.holds(ctx, d.EventID, d.ExternalRef)
		if err != nil {
			return err
		}
		if held {
			continue
		}
		rep.Lost = append(rep.Lost, d)
		if opts.DryRun {
			continue
		}
		if _, err := st.DeliveryRetry(ctx, &store.DeliveryRetryParams{Tenant: d.Tenant, ID: d.ID, Redeliver: true}); err != nil {
			return err
		}
		rep.Requeued++
	}
	return nil
}

// listAll reads every tenant's deliveries matching params, up to limit.
func listAll(ctx context.Context, st Store, params store.DeliveryListParams, limit int) ([]*store.Delivery, error) {
	params.AllTenants = true
	params.Limit = min(limit, 500)
	var out []*store.Delivery
	for len(out) < limit {
		page, err := st.DeliveryList(ctx, &params)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Deliveries...)
		if page.Next == nil {
			break
		}
		params.After = page.Next
	}
	return out, nil
}
