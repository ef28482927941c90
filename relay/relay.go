// Package relay delivers the outbox: it routes each event a job announced to
// the sinks of its tenant that subscribe to it, claims due deliveries under
// leases (any number of relays on one Postgres), delivers them - webhook,
// NATS JetStream or chat, one sink kind per level of protection the external
// system offers; on Postgres a sink with an idempotency key is delivered to
// at routing, each delivery written once - journals every attempt with the
// sink's external reference (one that landed at routing on its delivery),
// retries inside a budget, and dead-letters what cannot land. Reconcile
// compares the journal with the target systems.
//
// Delivery is at least once; an apply-once receiver (clientsdk/receiver)
// makes it once. See docs/architecture.md, "Effects".
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/oncejob/oncejob/failpoint"
	"github.com/oncejob/oncejob/store"
)

// Store is what a relay needs of a store.
type Store interface {
	store.DeliveryStore
	// OutboxList gives the reconciler an event's payload to publish again.
	OutboxList(ctx context.Context, params *store.OutboxListParams) ([]*store.OutboxEvent, error)
}

// Config configures a Relay. Zero fields take the defaults stated.
type Config struct {
	// Store holds the outbox and the deliveries. Required.
	Store Store
	// Deliverer, when set, routes the outbox and makes the first attempt
	// of each delivery to a sink with an idempotency key at routing, so
	// that such a delivery is written once, settled (store.OutboxDeliverer;
	// the Postgres store is one, the embedded store is not). Nil: the relay
	// routes through Store, and every delivery is claimed. Whoever chooses
	// the store sets it (cmd/oncejob); the relay never looks for it.
	Deliverer store.OutboxDeliverer
	// Sinks are the configured sinks; none is a relay that routes every
	// event to nothing.
	Sinks []SinkConfig
	// Owner names this relay in leases and the journal; default
	// "relay-<host>-<pid>-<random>".
	Owner string
	// BatchSize is how many deliveries one claim takes; default 100.
	BatchSize int
	// Loops is how many claim-deliver-settle loops run at once; default 2.
	Loops int
	// LeaseDuration is how long a claim holds; a relay that dies loses its
	// deliveries to another after it. Default 30s.
	LeaseDuration time.Duration
	// PollInterval is the wait between rounds when nothing was due and no
	// wake-up came; default 1s.
	PollInterval time.Duration
	// Wake, when set, starts a round at once (the store's notifications of
	// committed events).
	Wake <-chan struct{}
	// ReconcileInterval is how often the relay runs a reconciliation pass
	// (see Reconcile); default 1m, negative: never.
	ReconcileInterval time.Duration
	// Reconcile configures those passes.
	Reconcile ReconcileOptions
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Observer is told of every delivery attempt (metrics, traces);
	// default none.
	Observer Observer
}

// Observer is told of each delivery attempt as its result is decided,
// before the result is journaled, and of each round that failed. It must be
// quick and must not block.
type Observer interface {
	Delivered(ctx context.Context, d *store.Delivery, res *store.DeliveryResult)
	// RoundFailed: a round's step - "route", "claim" or "settle" - failed
	// with err; the relay tries again after PollInterval.
	RoundFailed(ctx context.Context, step string, err error)
}

type nopObserver struct{}

func (nopObserver) Delivered(context.Context, *store.Delivery, *store.DeliveryResult) {}
func (nopObserver) RoundFailed(context.Context, string, error)                        {}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Owner == "" {
		host, _ := os.Hostname()
		c.Owner = fmt.Sprintf("relay-%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	if c.BatchSize == 0 {
		c.BatchSize = 100
	}
	if c.Loops == 0 {
		c.Loops = 2
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = 30 * time.Second
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	return c
}

// Relay delivers the outbox. Run it; Close it after Run returned.
type Relay struct {
	cfg   Config
	sinks *Sinks
	log   *slog.Logger

	// busy wakes an idle loop when a round routed a full page: more are
	// waiting, and another loop routes another partition of them.
	busy chan struct{}

	failMu  sync.Mutex
	failing *roundError // the failure of the last round; nil after one that worked

	signals TestSignals
}

// roundError is a step that failed in every round since the first.
type roundError struct {
	step  string
	since time.Time
	err   error
}

func (e *roundError) Error() string {
	return fmt.Sprintf("%s failed in every round since %s: %v", e.step, e.since.UTC().Format(time.RFC3339), e.err)
}

func (e *roundError) Unwrap() error { return e.err }

// New connects the sinks (a JetStream sink creates its stream if asked) and
// returns a relay ready to Run.
func New(ctx context.Context, cfg Config) (*Relay, error) {
	cfg = cfg.WithDefaults()
	if cfg.Store == nil {
		return nil, errors.New("relay: Config.Store is required")
	}
	if cfg.BatchSize < 1 || cfg.Loops < 1 || cfg.LeaseDuration <= 0 || cfg.PollInterval <= 0 {
		return nil, errors.New("relay: BatchSize, Loops, LeaseDuration and PollInterval must be positive")
	}
	sinks, err := OpenSinks(ctx, cfg.Sinks, cfg.Store)
	if err != nil {
		return nil, err
	}
	return &Relay{cfg: cfg, sinks: sinks, log: cfg.Logger.With("relay", cfg.Owner), busy: make(chan struct{}, 1)}, nil
}

// Owner is the relay's name in leases and the journal.
func (r *Relay) Owner() string { return r.cfg.Owner }

// Close releases the sinks' connections.
func (r *Relay) Close() error { return r.sinks.Close() }

// Run delivers until ctx is done. A round routes new events, claims a batch,
// delivers it and settles it; rounds follow each other at once while there
// is work, and otherwise wait for a wake-up or PollInterval.
func (r *Relay) Run(ctx context.Context) error {
	if r.sinks.Len() == 0 {
		r.log.Info("relay running with no sinks: events are routed to nothing")
	}
	var wg sync.WaitGroup
	for range r.cfg.Loops {
		wg.Go(func() { r.loop(ctx) })
	}
	if r.cfg.ReconcileInterval > 0 {
		wg.Go(func() { r.reconcileLoop(ctx) })
	}
	wg.Wait()
	return nil
}

func (r *Relay) loop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		worked, err := r.round(ctx)
		if ctx.Err() != nil {
			return
		}
		if err := r.recordRound(ctx, err); err != nil {
			r.log.Error("relay round failed; trying again", "error", err)
			worked = false
		}
		if worked {
			continue
		}
		timer.Reset(r.cfg.PollInterval)
		select {
		case <-ctx.Done():
			return
		case <-r.busy:
		case <-r.cfg.Wake:
			// Every committed job event wakes the relay, most of them not
			// announcements: let a burst settle into one round, so a busy
			// engine does not drive the relay into back-to-back empty rounds.
			timer.Reset(wakeCoalesce) // Reset drops a pending expiry (Go 1.23 timers)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		case <-timer.C:
		}
	}
}

// recordRound counts a failed round (Observer.RoundFailed) and keeps what
// Health reports: the failure of the last round, dated from the first of
// the failures in a row of the same step, and returns that.
func (r *Relay) recordRound(ctx context.Context, err error) error {
	var re *roundError
	if err != nil && !errors.As(err, &re) {
		re = &roundError{step: "round", err: err}
	}
	if re != nil {
		r.cfg.Observer.RoundFailed(ctx, re.step, re.err)
	}
	failing := r.setFailing(re)
	if failing == nil {
		r.signals.Round.Signal(nil)
		return nil
	}
	r.signals.Round.Signal(failing)
	return failing
}

// setFailing keeps re as the last round's failure (nil: it worked) and
// returns what Health reports from now on.
func (r *Relay) setFailing(re *roundError) *roundError {
	r.failMu.Lock()
	defer r.failMu.Unlock()
	switch {
	case re == nil:
		r.failing = nil
	case r.failing == nil || r.failing.step != re.step:
		re.since = time.Now()
		r.failing = re
	default:
		r.failing = &roundError{step: re.step, since: r.failing.since, err: re.err}
	}
	return r.failing
}

// Health is nil while the relay's rounds work, else the error of the last
// one, dated from the first of the failures in a row (readiness shows it:
// docs/operations.md, "Readiness"). A relay that cannot claim delivers
// nothing, however healthy the rest of the process is.
func (r *Relay) Health() error {
	r.failMu.Lock()
	defer r.failMu.Unlock()
	if r.failing == nil {
		return nil
	}
	return r.failing
}

// wakeCoalesce is how long a woken relay waits for more wake-ups before its
// round: a small part of the delivery lag, a large cut of empty rounds.
const wakeCoalesce = 5 * time.Millisecond

// round reports whether it found work.
func (r *Relay) round(ctx context.Context) (bool, error) {
	routed, err := r.route(ctx)
	if err != nil {
		return false, &roundError{step: "route", err: err}
	}
	if routed >= r.routeLimit() {
		select {
		case r.busy <- struct{}{}:
		default:
		}
	}
	batch, err := r.cfg.Store.DeliveryClaim(ctx, &store.DeliveryClaimParams{
		Owner: r.cfg.Owner, Sinks: r.sinks.Names(), Limit: r.cfg.BatchSize, LeaseDuration: r.cfg.LeaseDuration,
	})
	if err != nil {
		return routed > 0, &roundError{step: "claim", err: err}
	}
	if len(batch) == 0 {
		return routed > 0, nil
	}
	results := r.deliver(ctx, batch)
	failpoint.Inject(failpoint.RelayAfterSend)
	// The settle must happen even when the relay is stopping: the sends did.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	res, err := r.cfg.Store.DeliverySettle(sctx, &store.DeliverySettleParams{Owner: r.cfg.Owner, Results: results})
	if err != nil {
		return true, &roundError{step: "settle", err: fmt.Errorf("%w (the deliveries go out again when their lease expires)", err)}
	}
	failpoint.Inject(failpoint.RelayAfterJournal)
	for _, id := range res.LeaseLost {
		r.log.Warn("delivery lease lost: another relay holds it; attempt journaled, nothing else written", "delivery_id", id)
	}
	r.disableGone(sctx, batch, results)
	return true, nil
}

// routeSendTimeout bounds the attempts made at routing, while the routing
// lock is held: one not answered by then is an unknown outcome, and its
// delivery is retried by a claim (with the sink's own timeout), so a slow
// receiver holds up the routing of other sinks' events this long at most.
const routeSendTimeout = 2 * time.Second

// routeLimit is how many events a round routes at most: five claims' worth.
func (r *Relay) routeLimit() int { return r.cfg.BatchSize * 5 }

// route routes a batch of the outbox. With a Deliverer it makes the first
// attempt of each delivery to a sink with an idempotency key at routing,
// and each such delivery is written once, settled; otherwise it only makes
// the deliveries, pending.
func (r *Relay) route(ctx context.Context) (int, error) {
	dr := r.cfg.Deliverer
	if dr == nil {
		return r.cfg.Store.OutboxRoute(ctx, &store.OutboxRouteParams{Route: r.sinks.Route, Limit: r.routeLimit()})
	}
	var sent []*store.Delivery
	var results []store.DeliveryResult
	n, err := dr.OutboxRouteDeliver(ctx, &store.OutboxRouteDeliverParams{
		Owner: r.cfg.Owner, Route: r.sinks.Route, Direct: r.sinks.Direct, Limit: r.routeLimit(),
		Hold: routeSendTimeout + 10*time.Second,
		Deliver: func(ctx context.Context, ds []*store.Delivery) []store.DeliveryResult {
			ctx, cancel := context.WithTimeout(ctx, routeSendTimeout)
			defer cancel()
			sent, results = ds, r.deliver(ctx, ds)
			failpoint.Inject(failpoint.RelayAfterSend)
			return results
		},
	})
	if err == nil && len(sent) > 0 {
		failpoint.Inject(failpoint.RelayAfterJournal)
		r.disableGone(ctx, sent, results)
	}
	return n, err
}

// deliver makes one attempt of each delivery of the batch at once - those
// of a BatchSink in one DeliverBatch per sink - and decides each one's next
// status.
func (r *Relay) deliver(ctx context.Context, batch []*store.Delivery) []store.DeliveryResult {
	results := make([]store.DeliveryResult, len(batch))
	bySink := map[string][]int{}
	var wg sync.WaitGroup
	for i, d := range batch {
		sink, _, ok := r.sinks.Get(d.Sink)
		if _, batched := sink.(BatchSink); ok && batched {
			bySink[d.Sink] = append(bySink[d.Sink], i)
			continue
		}
		wg.Go(func() {
			failpoint.Inject(failpoint.RelayBeforeSend)
			started := time.Now()
			var res Result
			if ok {
				res = sink.Deliver(ctx, d)
			} else {
				res = Result{Outcome: store.DeliveryOutcomeFailed, Err: fmt.Errorf("sink %q is not configured on this relay", d.Sink)}
			}
			results[i] = r.apply(ctx, d, res, started, time.Now())
		})
	}
	for name, idx := range bySink {
		wg.Go(func() {
			sink, _, _ := r.sinks.Get(name)
			ds := make([]*store.Delivery, len(idx))
			for j, i := range idx {
				ds[j] = batch[i]
			}
			failpoint.Inject(failpoint.RelayBeforeSend)
			started := time.Now()
			res := sink.(BatchSink).DeliverBatch(ctx, ds)
			finished := time.Now()
			for j, i := range idx {
				results[i] = r.apply(ctx, batch[i], res[j], started, finished)
			}
		})
	}
	wg.Wait()
	return results
}

func (r *Relay) logResult(ctx context.Context, d *store.Delivery, res store.DeliveryResult) {
	if res.Status == store.DeliveryStatusDelivered && !r.log.Enabled(ctx, slog.LevelDebug) {
		return // the common case: no attributes built for a line not logged
	}
	attrs := []any{"delivery_id", d.ID, "event_id", d.EventID, "sink", d.Sink, "attempt", d.Attempt, "outcome", res.Outcome, "status", res.Status}
	switch res.Status {
	case store.DeliveryStatusDelivered:
		r.log.Debug("delivered", append(attrs, "external_ref", res.ExternalRef, "duplicate", res.Duplicate)...)
	case store.DeliveryStatusDeadLettered:
		r.log.Error("delivery dead-lettered", append(attrs, "error", res.Error)...)
	default:
		r.log.Warn("delivery will be retried", append(attrs, "due_at", res.DueAt, "error", res.Error)...)
	}
}

// disableGone disables the sinks whose receiver answered 410 Gone.
func (r *Relay) disableGone(ctx context.Context, batch []*store.Delivery, results []store.DeliveryResult) {
	var done []string
	for i, res := range results {
		d := batch[i]
		if res.Outcome != store.DeliveryOutcomeSinkDisabled || slices.Contains(done, d.Sink) {
			continue
		}
		done = append(done, d.Sink)
		reason := fmt.Sprintf("the receiver answered 410 Gone to event %s at %s", d.EventID, res.FinishedAt.UTC().Format(time.RFC3339))
		if err := r.cfg.Store.SinkDisable(ctx, &store.SinkDisableParams{Sink: d.Sink, Tenant: d.Tenant, Reason: reason}); err != nil {
			r.log.Error("disabling a sink failed", "sink", d.Sink, "error", err)
			continue
		}
		r.log.Error("sink disabled: its deliveries wait until `oncejob deliveries retry --sink "+d.Sink+"`", "sink", d.Sink, "reason", reason)
	}
}

func (r *Relay) reconcileLoop(ctx context.Context) {
	ticker := time.NewTicker(r.cfg.ReconcileInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		report, err := Reconcile(ctx, r.cfg.Store, r.sinks, r.cfg.Reconcile)
		if err != nil {
			r.log.Error("reconciliation failed", "error", err)
			continue
		}
		if !report.OK() {
			r.log.Warn("reconciliation found discrepancies", "summary", report.Summary())
		}
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
