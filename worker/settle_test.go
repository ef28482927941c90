package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/pace"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/retry"
	"github.com/oncejob/oncejob/store"
)

// TestDecide is settlement's decision table, row by row: every kind of
// error an attempt can end with, and the budgets around it.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	policy := pipeline.RetryPolicy{Policy: retry.Policy{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: time.Minute, Multiplier: 2}, Deadline: time.Hour, MaxCostTokens: 1000}
	base := func() settleInput {
		return settleInput{now: now, retry: policy, onUnknown: pipeline.OnUnknownRetry, attempts: 2, claims: 2, budgetStarted: now.Add(-time.Minute), jitter: 0.5}
	}
	provider := func(c llm.Class) error { return &llm.Error{Class: c, Message: "provider said no"} }
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }

	type want struct {
		act       act
		to        store.JobStatus
		code      string
		retryable bool
		at        *time.Time
		refund    bool
		budget    string
		leaseLost bool
		logError  bool
	}
	rows := []struct {
		name string
		in   func(*settleInput)
		want want
	}{
		{"lease lost in a write", func(in *settleInput) { in.err = fmt.Errorf("checkpoint: %w", store.ErrLeaseLost) },
			want{act: actNone, leaseLost: true}},
		{"lease lost at a heartbeat", func(in *settleInput) { in.err = context.Canceled; in.cause = errLeaseLost },
			want{act: actNone, leaseLost: true}},
		{"lease lost wins over a cancel", func(in *settleInput) { in.err = errCancelRequested; in.cause = errLeaseLost },
			want{act: actNone, leaseLost: true}},
		{"computed by another job", func(in *settleInput) { in.err = errAlreadyComputed },
			want{act: actPublish}},
		{"cancel seen at the start", func(in *settleInput) { in.err = errCancelRequested },
			want{act: actTransition, to: store.JobStatusCancelled}},
		{"cancel seen at a heartbeat", func(in *settleInput) { in.err = context.Canceled; in.cause = errCancelRequested },
			want{act: actTransition, to: store.JobStatusCancelled}},
		{"cancel wins over the shutdown", func(in *settleInput) { in.err = errCancelRequested; in.shuttingDown = true },
			want{act: actTransition, to: store.JobStatusCancelled}},
		{"worker shut down", func(in *settleInput) { in.err = context.Canceled; in.shuttingDown = true },
			want{act: actTransition, to: store.JobStatusRetryWait, at: at(0), refund: true}},
		{"shutdown wins over a provider error", func(in *settleInput) { in.err = provider(llm.ClassUnavailable); in.shuttingDown = true },
			want{act: actTransition, to: store.JobStatusRetryWait, at: at(0), refund: true}},
		{"a plan awaits approval", func(in *settleInput) { in.err = errAwaitApproval{output: []byte(`{}`)} },
			want{act: actTransition, to: store.JobStatusAwaitingApproval}},
		{"tokens spent", func(in *settleInput) { in.err = &budgetError{"tokens", "1000 of 1000 tokens used"} },
			want{act: actTransition, to: store.JobStatusDeadLettered, code: budgetSpentCode, budget: "tokens"}},
		{"attempts spent by dying workers", func(in *settleInput) { in.err = &budgetError{"attempts", "attempts spent: 5 of 5"} },
			want{act: actTransition, to: store.JobStatusDeadLettered, code: budgetSpentCode, budget: "attempts", refund: true}},
		{"a permanent error", func(in *settleInput) { in.err = permanent("PIPELINE_UNKNOWN", "no such pipeline") },
			want{act: actTransition, to: store.JobStatusFailed, code: "PIPELINE_UNKNOWN"}},
		{"a retryable error of ours", func(in *settleInput) {
			in.err = &retryableError{code: "STORE_HICCUP", err: errors.New("try again")}
		}, want{act: actTransition, to: store.JobStatusRetryWait, code: "STORE_HICCUP", retryable: true, at: at(time.Second)}},
		{"a retryable error of ours, attempts spent", func(in *settleInput) {
			in.err = &retryableError{code: "STORE_HICCUP", err: errors.New("try again")}
			in.attempts = 5
		}, want{act: actTransition, to: store.JobStatusDeadLettered, code: budgetSpentCode, budget: "attempts"}},
		{"another version's worker claimed it: not a try", func(in *settleInput) {
			in.err = &retryableError{code: "PIPELINE_VERSION_MISMATCH", notTried: true, err: errors.New("v2 needed")}
		}, want{act: actTransition, to: store.JobStatusRetryWait, code: "PIPELINE_VERSION_MISMATCH", retryable: true, at: at(time.Second), refund: true}},
		{"another version's worker claimed it, at the attempts limit: still not a try; the backoff grows with the claims to its third step (4 s, jittered by half) and no further", func(in *settleInput) {
			in.err = &retryableError{code: "PIPELINE_VERSION_MISMATCH", notTried: true, err: errors.New("v2 needed")}
			in.attempts, in.claims = 5, 60
		}, want{act: actTransition, to: store.JobStatusRetryWait, code: "PIPELINE_VERSION_MISMATCH", retryable: true, at: at(2 * time.Second), refund: true}},
		{"another version's worker claimed it, past the deadline: dead-lettered", func(in *settleInput) {
			in.err = &retryableError{code: "PIPELINE_VERSION_MISMATCH", notTried: true, err: errors.New("v2 needed")}
			in.budgetStarted = now.Add(-time.Hour)
		}, want{act: actTransition, to: store.JobStatusDeadLettered, code: budgetSpentCode, budget: "deadline", refund: true}},
		{"the store is down", func(in *settleInput) { in.err = fmt.Errorf("claim: %w", store.ErrUnavailable) },
			want{act: actRequeueAfterOutage}},
		{"the store refused a value of the job", func(in *settleInput) { in.err = fmt.Errorf("write: %w", store.ErrInvalidRow) },
			want{act: actTransition, to: store.JobStatusFailed, code: "INVALID_DATA"}},
		{"an infrastructure error", func(in *settleInput) { in.err = errors.New("disk on fire") },
			want{act: actNone, logError: true}},
		{"provider rate limited: the attempt is refunded", func(in *settleInput) { in.err = provider(llm.ClassRateLimited) },
			want{act: actTransition, to: store.JobStatusRetryWait, code: "PROVIDER_RATE_LIMITED", retryable: true, at: at(time.Second), refund: true}},
		{"provider rate limited with Retry-After over the backoff", func(in *settleInput) {
			in.err = &llm.Error{Class: llm.ClassRateLimited, RetryAfter: 30 * time.Second}
		}, want{act: actTransition, to: store.JobStatusRetryWait, code: "PROVIDER_RATE_LIMITED", retryable: true, at: at(30 * time.Second), refund: true}},
		{"provider rate limited, attempts spent: still no dead letter", func(in *settleInput) { in.err = provider(llm.ClassRateLimited); in.attempts = 5 },
			want{act: actTransition, to: store.JobStatusRetryWait, code: "PROVIDER_RATE_LIMITED", retryable: true, at: at(time.Second), refund: true}},
		{"provider rate limited past the deadline", func(in *settleInput) {
			in.err = &llm.Error{Class: llm.ClassRateLimited, RetryAfter: 2 * time.Second}
			in.budgetStarted = now.Add(-time.Hour + time.Second)
		}, want{act: actTransition, to: store.JobStatusDeadLettered, code: budgetSpentCode, budget: "deadline", refund: true}},
		{"waiting for a provider limit", func(in *settleInput) {
			in.err = &pace.WaitError{Limit: "default", Until: now.Add(42 * time.Second), Reason: "requests per minute"}
			in.attempts = 5
		}, want{act: actTransition, to: store.JobStatusRetryWait, code: limitWaitCode, retryable: true, at: at(42 * time.Second), refund: true}},
		{"waiting for a provider limit past the deadline", func(in *settleInput) {
			in.err = &pace.WaitError{Limit: "default", Until: now.Add(time.Hour), Reason: "requests per minute"}
		}, want{act: actTransition, to: store.JobStatusDeadLettered, code: budgetSpentCode, budget: "deadline", refund: true}},
		{"provider unavailable", func(in *settleInput) { in.err = provider(llm.ClassUnavailable) },
			want{act: actTransition, to: store.JobStatusRetryWait, code: "PROVIDER_UNAVAILABLE", retryable: true, at: at(time.Second)}},
		{"provider unavailable, attempts spent", func(in *settleInput) { in.err = provider(llm.ClassUnavailable); in.attempts = 5 },
			want{act: actTransition, to: store.JobStatusDeadLettered, code: budgetSpentCode, budget: "attempts"}},
		{"provider unavailable, the next retry passes the deadline", func(in *settleInput) {
			in.err = provider(llm.ClassUnavailable)
			in.budgetStarted = now.Add(-time.Hour + 500*time.Millisecond)
		}, want{act: actTransition, to: store.JobStatusDeadLettered, code: budgetSpentCode, budget: "deadline"}},
		{"provider rejected the request", func(in *settleInput) { in.err = provider(llm.ClassInvalidRequest) },
			want{act: actTransition, to: store.JobStatusFailed, code: "PROVIDER_INVALID_REQUEST"}},
		{"provider output invalid: not retryable, so failed, not retried", func(in *settleInput) { in.err = provider(llm.ClassInvalidOutput) },
			want{act: actTransition, to: store.JobStatusFailed, code: "PROVIDER_INVALID_OUTPUT"}},
		{"outcome unknown under retry", func(in *settleInput) { in.err = provider(llm.ClassOutcomeUnknown) },
			want{act: actTransition, to: store.JobStatusRetryWait, code: unknownOutcomeCode, retryable: true, at: at(time.Second)}},
		{"outcome unknown under retry, attempts spent", func(in *settleInput) { in.err = provider(llm.ClassOutcomeUnknown); in.attempts = 5 },
			want{act: actTransition, to: store.JobStatusDeadLettered, code: budgetSpentCode, budget: "attempts"}},
		{"outcome unknown under reconcile, provider can look up", func(in *settleInput) {
			in.err = provider(llm.ClassOutcomeUnknown)
			in.onUnknown = pipeline.OnUnknownReconcile
			in.canLookup = true
			in.attempts = 5 // reconciling costs no new call: the budget does not stop it
		}, want{act: actTransition, to: store.JobStatusOutcomeUnknown, code: unknownOutcomeCode, retryable: true, at: at(8 * time.Second)}},
		{"outcome unknown under reconcile, provider cannot look up", func(in *settleInput) {
			in.err = provider(llm.ClassOutcomeUnknown)
			in.onUnknown = pipeline.OnUnknownReconcile
		}, want{act: actTransition, to: store.JobStatusOutcomeUnknown, code: unknownOutcomeCode, retryable: true}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			in := base()
			row.in(&in)
			d := decide(in)
			w := row.want
			if d.act != w.act || d.to != w.to || d.refund != w.refund || d.budget != w.budget || d.leaseLost != w.leaseLost || d.logError != w.logError {
				t.Fatalf("decide = act %d to %q refund %t budget %q leaseLost %t logError %t; want act %d to %q refund %t budget %q leaseLost %t logError %t",
					d.act, d.to, d.refund, d.budget, d.leaseLost, d.logError, w.act, w.to, w.refund, w.budget, w.leaseLost, w.logError)
			}
			code, retryable := "", false
			if d.err != nil {
				code, retryable = d.err.Code, d.err.Retryable
			}
			if code != w.code || retryable != w.retryable {
				t.Fatalf("error = %q retryable %t; want %q retryable %t", code, retryable, w.code, w.retryable)
			}
			// Job.error.retryable (proto/oncejob/v1/job.proto): whether the
			// engine will try the job again on its own.
			if again := d.to == store.JobStatusRetryWait || d.to == store.JobStatusOutcomeUnknown; d.err != nil && d.err.Retryable != again {
				t.Fatalf("error retryable %t on a job going to %s", d.err.Retryable, d.to)
			}
			if (d.at == nil) != (w.at == nil) || (d.at != nil && !d.at.Equal(*w.at)) {
				t.Fatalf("due at %v; want %v", d.at, w.at)
			}
			if d.act != actPublish && d.message == "" {
				t.Fatal("no message: every decision says why")
			}
			if d.to == store.JobStatusDeadLettered && !strings.HasPrefix(d.message, "dead-lettered: ") {
				t.Fatalf("dead letter message %q", d.message)
			}
		})
	}
}

// TestDecideBudgetSpentIsNeverRetryable: every way to a dead letter says
// BUDGET_SPENT the same way, not retryable (the engine will not try again;
// a replay grants a fresh budget), whatever the last error was.
func TestDecideBudgetSpentIsNeverRetryable(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	policy := pipeline.RetryPolicy{Policy: retry.Policy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: time.Minute, Multiplier: 2}, Deadline: time.Minute}
	errs := []error{
		&budgetError{"tokens", "spent"}, &budgetError{"deadline", "passed"},
		&retryableError{code: "X", err: errors.New("x")},
		&llm.Error{Class: llm.ClassUnavailable},
		&llm.Error{Class: llm.ClassOutcomeUnknown}, &llm.Error{Class: llm.ClassInvalidOutput},
	}
	for _, err := range errs {
		for _, started := range []time.Time{now.Add(-time.Hour), now} {
			for attempts := int32(1); attempts <= 4; attempts++ {
				for _, j := range []float64{0, 0.5, 0.999} {
					d := decide(settleInput{err: err, now: now, retry: policy, onUnknown: pipeline.OnUnknownRetry, attempts: attempts, budgetStarted: started, jitter: j})
					if d.to != store.JobStatusDeadLettered {
						if d.at != nil && d.at.After(started.Add(policy.Deadline)) {
							t.Fatalf("%v attempts %d: due %v past the deadline %v", err, attempts, d.at, started.Add(policy.Deadline))
						}
						if attempts >= 3 && d.to == store.JobStatusRetryWait {
							t.Fatalf("%v: retried with attempts spent (%d of 3)", err, attempts)
						}
						continue
					}
					if d.err.Code != budgetSpentCode || d.err.Retryable || d.budget == "" {
						t.Fatalf("%v attempts %d: dead letter %+v budget %q", err, attempts, d.err, d.budget)
					}
				}
			}
		}
	}
}
