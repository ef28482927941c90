package relay

import (
	"context"
	"strconv"
	"time"

	"github.com/oncejob/oncejob/retry"
	"github.com/oncejob/oncejob/store"
)

// attemptInput is everything deciding a delivery's next step depends on.
// decide reads only this, so every rule of docs/architecture.md "Routing
// and deliveries" is a row of TestDecide.
type attemptInput struct {
	// outcome is how the attempt ended; retryAfter is the receiver's
	// Retry-After, if it sent one.
	outcome    store.DeliveryOutcome
	retryAfter time.Duration
	policy     RetryPolicy
	// attempts is the delivery's budget used so far, this attempt
	// included; budgetStarted is when its max_age started (routing, or
	// the last RetryDelivery).
	attempts      int32
	budgetStarted time.Time
	now           time.Time
	jitter        float64 // in [0, 1): the point of the backoff window
}

// decision is where a delivery goes after an attempt: its status, when it
// is due again, and why the budget ended it (empty otherwise).
type decision struct {
	status store.DeliveryStatus
	due    time.Time
	reason string
}

// decide is the relay's decision table: pure, the first matching row wins.
//
//   - delivered: delivered, whatever the budget.
//   - refused for good (a 4xx other than 408, 410 and 429): dead-lettered at
//     once; no retry can help.
//   - the receiver retired the endpoint (410): pending, due now; the sink is
//     disabled, so it waits unclaimed until it is enabled again.
//   - failed, or unknown (sent, no answer: it may have landed): retried
//     with the same event id (the delivery and its envelope do not change)
//     after a full-jitter backoff of at least Retry-After; dead-lettered
//     when the attempts are spent or the next try would pass max_age.
//     An outcome this relay does not know is retried as a failure.
func decide(in attemptInput) decision {
	switch in.outcome {
	case store.DeliveryOutcomeDelivered:
		return decision{status: store.DeliveryStatusDelivered, due: in.now}
	case store.DeliveryOutcomeDeadLettered:
		return decision{status: store.DeliveryStatusDeadLettered, due: in.now}
	case store.DeliveryOutcomeSinkDisabled:
		return decision{status: store.DeliveryStatusPending, due: in.now}
	}
	p := in.policy
	if p.Spent(int(in.attempts)) {
		return decision{status: store.DeliveryStatusDeadLettered, due: in.now, reason: "retry budget spent: " + strconv.Itoa(int(in.attempts)) + " attempts"}
	}
	due := in.now.Add(p.Wait(int(in.attempts), in.retryAfter, in.jitter))
	if due.After(in.budgetStarted.Add(p.MaxAge)) {
		return decision{status: store.DeliveryStatusDeadLettered, due: in.now, reason: "retry budget spent: the next attempt would pass max_age " + p.MaxAge.String()}
	}
	return decision{status: store.DeliveryStatusPending, due: due}
}

// apply decides the next step of d after an attempt that ended with res,
// and makes it the attempt's result: what the round's DeliverySettle
// journals and writes, fenced by the claim. It logs it and tells the
// Observer.
func (r *Relay) apply(ctx context.Context, d *store.Delivery, res Result, started, finished time.Time) store.DeliveryResult {
	_, policy, _ := r.sinks.Get(d.Sink)
	dec := decide(attemptInput{
		outcome: res.Outcome, retryAfter: res.RetryAfter, policy: policy,
		attempts: d.Attempts, budgetStarted: d.BudgetStartedAt, now: finished, jitter: retry.Jitter(),
	})
	msg := ""
	if res.Err != nil {
		msg = res.Err.Error()
	}
	if dec.reason != "" {
		msg = dec.reason + "; last: " + msg
	}
	out := store.DeliveryResult{
		DeliveryID: d.ID, EventID: d.EventID, Sink: d.Sink, Tenant: d.Tenant, Attempt: d.Attempt,
		Outcome: res.Outcome, Status: dec.status, DueAt: dec.due, HTTPStatus: int32(res.HTTPStatus),
		Error: truncate(msg, 2000), ExternalRef: res.ExternalRef, Duplicate: res.Duplicate,
		StartedAt: started, FinishedAt: finished,
	}
	r.logResult(ctx, d, out)
	r.cfg.Observer.Delivered(ctx, d, &out)
	return out
}
