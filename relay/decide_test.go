package relay

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/retry"
	"github.com/oncejob/oncejob/store"
)

// TestDecide is the relay's decision table, row by row: every outcome a
// delivery attempt can end with, and the budget around it.
func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	policy := RetryPolicy{Policy: retry.Policy{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: time.Minute, Multiplier: 2}, MaxAge: time.Hour}
	base := func() attemptInput {
		// The third attempt failed: its backoff ceiling is 4 s, the jitter
		// picks its middle.
		return attemptInput{outcome: store.DeliveryOutcomeFailed, policy: policy, attempts: 3, budgetStarted: now.Add(-time.Minute), now: now, jitter: 0.5}
	}
	at := func(d time.Duration) time.Time { return now.Add(d) }
	const (
		pending   = store.DeliveryStatusPending
		delivered = store.DeliveryStatusDelivered
		dead      = store.DeliveryStatusDeadLettered
	)
	rows := []struct {
		name   string
		in     func(*attemptInput)
		status store.DeliveryStatus
		due    time.Time
		reason string // a prefix; empty: none
	}{
		{"delivered", func(in *attemptInput) { in.outcome = store.DeliveryOutcomeDelivered }, delivered, at(0), ""},
		{"delivered on the last attempt the budget allows", func(in *attemptInput) {
			in.outcome, in.attempts = store.DeliveryOutcomeDelivered, 9
		}, delivered, at(0), ""},
		{"delivered past max_age", func(in *attemptInput) {
			in.outcome, in.budgetStarted = store.DeliveryOutcomeDelivered, now.Add(-48*time.Hour)
		}, delivered, at(0), ""},
		{"failed: retried after the backoff", func(*attemptInput) {}, pending, at(2 * time.Second), ""},
		{"failed on the first attempt: the initial backoff", func(in *attemptInput) { in.attempts = 1 }, pending, at(500 * time.Millisecond), ""},
		{"failed, jitter at its bottom: due at once", func(in *attemptInput) { in.jitter = 0 }, pending, at(0), ""},
		{"failed, the backoff capped at max_backoff", func(in *attemptInput) {
			in.policy.MaxAttempts, in.attempts = 100, 30
		}, pending, at(30 * time.Second), ""},
		{"failed with a Retry-After over the backoff: waits it", func(in *attemptInput) { in.retryAfter = 10 * time.Second }, pending, at(10 * time.Second), ""},
		{"failed with a Retry-After under the backoff: the backoff", func(in *attemptInput) { in.retryAfter = time.Second }, pending, at(2 * time.Second), ""},
		{"failed with a Retry-After past max_backoff: waits it", func(in *attemptInput) { in.retryAfter = 5 * time.Minute }, pending, at(5 * time.Minute), ""},
		{"failed, attempts spent: dead letter", func(in *attemptInput) { in.attempts = 5 }, dead, at(0), "retry budget spent: 5 attempts"},
		{"failed, the next try would pass max_age: dead letter", func(in *attemptInput) {
			in.budgetStarted = now.Add(-time.Hour + time.Second)
		}, dead, at(0), "retry budget spent: the next attempt would pass max_age 1h0m0s"},
		{"failed, a Retry-After past max_age: dead letter", func(in *attemptInput) { in.retryAfter = 2 * time.Hour }, dead, at(0), "retry budget spent: the next attempt would pass max_age"},
		{"failed, the next try exactly at max_age: retried", func(in *attemptInput) {
			in.budgetStarted = now.Add(-time.Hour + 2*time.Second)
		}, pending, at(2 * time.Second), ""},
		{"unknown (sent, no answer): retried with the same event id after the backoff, not failed", func(in *attemptInput) {
			in.outcome = store.DeliveryOutcomeUnknown
		}, pending, at(2 * time.Second), ""},
		{"unknown with the attempts spent: dead letter (reconciliation still finds it if it landed)", func(in *attemptInput) {
			in.outcome, in.attempts = store.DeliveryOutcomeUnknown, 5
		}, dead, at(0), "retry budget spent: 5 attempts"},
		{"refused for good: dead letter at once, budget left", func(in *attemptInput) {
			in.outcome, in.attempts = store.DeliveryOutcomeDeadLettered, 1
		}, dead, at(0), ""},
		{"the receiver retired the endpoint (410): waits, due now, for the sink to be enabled", func(in *attemptInput) {
			in.outcome = store.DeliveryOutcomeSinkDisabled
		}, pending, at(0), ""},
		{"410 with the attempts spent: still waits, no dead letter", func(in *attemptInput) {
			in.outcome, in.attempts = store.DeliveryOutcomeSinkDisabled, 5
		}, pending, at(0), ""},
		{"an outcome this relay does not know: retried as a failure", func(in *attemptInput) {
			in.outcome = "from_a_newer_relay"
		}, pending, at(2 * time.Second), ""},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			in := base()
			row.in(&in)
			d := decide(in)
			require.Equal(t, row.status, d.status)
			require.True(t, d.due.Equal(row.due), "due %v, want %v", d.due, row.due)
			if row.reason == "" {
				require.Empty(t, d.reason)
			} else {
				require.True(t, strings.HasPrefix(d.reason, row.reason), "reason %q, want %q...", d.reason, row.reason)
			}
		})
	}
}

// TestDecideNeverPassesTheBudget: for seeded random inputs a retried
// delivery is never due past max_age nor retried with its attempts spent,
// and its due time is within [now, now + max(ceiling, Retry-After)].
func TestDecideNeverPassesTheBudget(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	outcomes := []store.DeliveryOutcome{store.DeliveryOutcomeFailed, store.DeliveryOutcomeUnknown}
	for range 20_000 {
		p := RetryPolicy{Policy: retry.Policy{
			MaxAttempts:    1 + rng.IntN(15),
			InitialBackoff: time.Duration(1 + rng.Int64N(int64(10*time.Second))),
			MaxBackoff:     time.Duration(1 + rng.Int64N(int64(time.Hour))),
			Multiplier:     1 + 3*rng.Float64(),
		}, MaxAge: time.Duration(1 + rng.Int64N(int64(48*time.Hour)))}
		in := attemptInput{
			outcome: outcomes[rng.IntN(2)], policy: p,
			attempts: int32(1 + rng.IntN(20)), budgetStarted: now.Add(-time.Duration(rng.Int64N(int64(48 * time.Hour)))),
			now: now, jitter: rng.Float64(),
		}
		if rng.IntN(4) == 0 {
			in.retryAfter = time.Duration(rng.Int64N(int64(2 * time.Hour)))
		}
		d := decide(in)
		switch d.status {
		case store.DeliveryStatusDeadLettered:
			require.NotEmpty(t, d.reason, "seed %d: %+v", seed, in)
		case store.DeliveryStatusPending:
			require.Less(t, int(in.attempts), p.MaxAttempts, "seed %d: retried with its attempts spent: %+v", seed, in)
			require.False(t, d.due.After(in.budgetStarted.Add(p.MaxAge)), "seed %d: due past max_age: %+v", seed, in)
			require.False(t, d.due.Before(now.Add(in.retryAfter)), "seed %d: due before Retry-After: %+v", seed, in)
			require.False(t, d.due.After(now.Add(max(p.Backoff().Ceiling(int(in.attempts)), in.retryAfter))), "seed %d: due past the ceiling: %+v", seed, in)
		default:
			t.Fatalf("seed %d: %s after a %s", seed, d.status, in.outcome)
		}
	}
}

// TestApplyKeepsTheDeliveryAndItsOutcome: apply writes the decision onto
// the attempt's result without changing what identifies the delivery -
// an unknown outcome goes out again under the same event id and is
// journaled unknown, not failed - and says why a budget ended it.
func TestApplyKeepsTheDeliveryAndItsOutcome(t *testing.T) {
	t.Parallel()
	cfg := Config{}.WithDefaults()
	r := &Relay{cfg: cfg, sinks: &Sinks{byName: map[string]*openSink{}}, log: cfg.Logger}
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	d := &store.Delivery{ID: 7, EventID: "evt-1", Sink: "gone", Tenant: "acme", Attempt: 3, Attempts: 1, BudgetStartedAt: now}
	for _, outcome := range []store.DeliveryOutcome{store.DeliveryOutcomeUnknown, store.DeliveryOutcomeFailed, store.DeliveryOutcomeDelivered} {
		res := r.apply(context.Background(), d, Result{Outcome: outcome, Err: errors.New("no answer"), ExternalRef: "ref"}, now, now)
		require.Equal(t, d.ID, res.DeliveryID)
		require.Equal(t, "evt-1", res.EventID, "the same event id on every attempt")
		require.Equal(t, d.Attempt, res.Attempt, "the claim's fencing token")
		require.Equal(t, outcome, res.Outcome, "journaled as it ended")
		require.Equal(t, "ref", res.ExternalRef)
	}
	spent := *d
	spent.Attempts = 12 // the default budget of a sink this relay does not know
	res := r.apply(context.Background(), &spent, Result{Outcome: store.DeliveryOutcomeFailed, Err: errors.New("503")}, now, now)
	require.Equal(t, store.DeliveryStatusDeadLettered, res.Status)
	require.Equal(t, "retry budget spent: 12 attempts; last: 503", res.Error)
}
