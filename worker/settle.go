package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oncejob/oncejob/failpoint"
	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/pace"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/retry"
	"github.com/oncejob/oncejob/store"
)

// unknownOutcomeCode is the job error of a call whose outcome is unknown.
const unknownOutcomeCode = "PROVIDER_OUTCOME_UNKNOWN"

// budgetSpentCode is the job error of a dead letter: a budget (attempts,
// deadline or tokens) is spent. It is never retryable: the engine will not
// try the job again; ReplayJob, which grants a fresh budget, may.
const budgetSpentCode = "BUDGET_SPENT"

// publish is the published stage: the pending checkpoints, the output,
// SUCCEEDED, its event and its outbox event (the store writes it) commit in
// one transaction, which the completer shares with the other jobs ready to
// publish. A nil output publishes the result another job computed for the
// same dedup key.
func (r *run) publish(ctx context.Context, output []byte) (err error) {
	_, end := r.w.cfg.Observer.StageStarted(ctx, r.job, store.JobStagePublished, -1)
	defer func() { end("computed", err) }()
	err = r.buf.drain(func(cps []store.StageCheckpoint) error {
		_, err := r.w.completer.publish(&store.JobPublishParams{
			Lease:       r.lease,
			Output:      output,
			Message:     "published",
			Checkpoints: cps,
		})
		return err
	})
	if err != nil {
		return err
	}
	r.ended = attemptEnd{status: store.JobStatusSucceeded}
	failpoint.Inject(failpoint.AfterPublishCommit)
	return nil
}

// settleInput is everything settling an attempt depends on. decide reads
// only this, so every rule of docs/architecture.md "Failure classes" is a
// row of a table test.
type settleInput struct {
	err   error // how the attempt ended
	cause error // the cause of the job context's cancellation, if any
	// shuttingDown: this worker's own context ended (a deploy, a stop).
	shuttingDown bool
	now          time.Time
	retry        pipeline.RetryPolicy
	onUnknown    string
	// attempts is the job's attempts budget used so far, this attempt
	// included; budgetStarted is when its deadline started.
	attempts      int32
	budgetStarted time.Time
	// claims is the job's attempt number: every claim, tried or not.
	claims int32
	// canLookup: the provider can look a call up by its key
	// (llm.Provider.CanLookup, a fixed property of the provider).
	canLookup bool
	jitter    float64 // in [0, 1): the point of the backoff window
}

// act is how a decision is carried out.
type act int

const (
	// actNone writes nothing: the lease is lost (another worker holds the
	// job), or an infrastructure error leaves the lease to expire so the
	// job is taken over with an attempt counted.
	actNone act = iota
	// actPublish publishes the result another job computed.
	actPublish
	// actTransition writes the decided status, fenced by the lease.
	actTransition
	// actRequeueAfterOutage gives the attempt back once the store answers.
	actRequeueAfterOutage
)

// decision is what settle writes: the next status, its error, when the job
// is due again, whether the attempt goes back to the budget, and why.
type decision struct {
	act     act
	to      store.JobStatus
	err     *store.JobError
	at      *time.Time
	refund  bool
	output  []byte // the planned output an approval waits on
	message string
	// budget names the budget a dead letter spent, for the Observer.
	budget string
	// leaseLost: another worker holds the job; nothing at all is written.
	leaseLost bool
	// logError: nothing is written, and the reason deserves an error log.
	logError bool
}

// decide is settlement's decision table: pure, the first matching row wins.
func decide(in settleInput) decision {
	err := in.err
	var (
		await     errAwaitApproval
		budget    *budgetError
		perm      *permanentError
		retryable *retryableError
		limitWait *pace.WaitError
	)
	switch {
	case errors.Is(err, store.ErrLeaseLost) || errors.Is(in.cause, errLeaseLost):
		return decision{act: actNone, leaseLost: true, message: "lease lost: another worker holds the job; stopping without writing"}
	case errors.Is(err, errAlreadyComputed):
		return decision{act: actPublish}
	case errors.Is(err, errCancelRequested) || errors.Is(in.cause, errCancelRequested):
		return decision{act: actTransition, to: store.JobStatusCancelled, message: "cancelled while running"}
	case in.shuttingDown:
		// Interrupted by this worker's shutdown, not tried: the attempt goes
		// back to the budget, so deploys cannot dead-letter a healthy job.
		now := in.now
		return decision{act: actTransition, to: store.JobStatusRetryWait, at: &now, refund: true, message: "worker shut down; requeued"}
	case errors.As(err, &await):
		return decision{act: actTransition, to: store.JobStatusAwaitingApproval, output: await.output, message: "awaiting approval: the planned output is on the job"}
	case errors.As(err, &budget):
		d := deadLetter(budget.kind, budget.reason)
		// The attempts budget is checked at the claim, before anything is
		// tried: that claim goes back, so Job.attempts_spent reads N of N.
		d.refund = budget.kind == "attempts"
		return d
	case errors.As(err, &perm):
		return fail(&store.JobError{Code: perm.code, Message: perm.err.Error()})
	case errors.As(err, &retryable):
		jobErr := &store.JobError{Code: retryable.code, Message: retryable.err.Error(), Retryable: true}
		if retryable.notTried {
			return notTried(in, jobErr)
		}
		return retryOrDeadLetter(in, jobErr, 0)
	case errors.As(err, &limitWait):
		// The provider limit would keep the call waiting longer than a
		// claim waits: the job goes back to the queue until its turn,
		// its attempt refunded (docs/architecture.md, "Provider limits").
		return waitForProvider(in, limitWait.Until, &store.JobError{Code: limitWaitCode, Message: limitWait.Error(), Retryable: true})
	case errors.Is(err, store.ErrUnavailable):
		return decision{act: actRequeueAfterOutage, message: "the store failed under the attempt; requeueing the job once it answers"}
	case errors.Is(err, store.ErrInvalidRow):
		// The store refused a value of this job's own (a model's output
		// holding \u0000, say): every attempt would write it again, so the
		// job fails now, with the reason, rather than through lease
		// takeovers. The database's own words stay in the log, as at the API.
		return fail(&store.JobError{Code: "INVALID_DATA", Message: "the store refused a value of this job (see the server log); every attempt would write it again"})
	}
	return decideProviderError(in)
}

// decideProviderError settles an attempt ended by an error of the
// provider's class, or by another infrastructure error.
func decideProviderError(in settleInput) decision {
	err := in.err
	class, ok := llm.ClassOf(err)
	if !ok {
		// Another infrastructure error: the lease expires and the job is
		// taken over, counting an attempt, so a failure this job causes
		// every time ends in its budget.
		return decision{act: actNone, logError: true, message: "attempt ended by an infrastructure error; the lease will expire"}
	}
	jobErr := &store.JobError{Code: "PROVIDER_" + strings.ToUpper(class.String()), Message: err.Error(), Retryable: llm.Retryable(class)}
	if !jobErr.Retryable {
		// Invalid request or output: the same request cannot succeed
		// later, so the job fails, as its error's retryable flag says.
		return fail(jobErr)
	}
	switch class {
	case llm.ClassRateLimited:
		// The provider's pacing, not the job's failure: the attempt goes
		// back to the budget; only the deadline bounds the wait.
		var le *llm.Error
		_ = errors.As(err, &le)
		return waitForProvider(in, in.now.Add(in.retry.Wait(retry.NotTriedStep(int(in.claims)), le.RetryAfter, in.jitter)), jobErr)
	case llm.ClassOutcomeUnknown:
		jobErr.Code = unknownOutcomeCode
		if in.onUnknown == pipeline.OnUnknownReconcile {
			return awaitReconcile(in, jobErr)
		}
	}
	var retryAfter time.Duration
	var le *llm.Error
	if errors.As(err, &le) {
		retryAfter = le.RetryAfter
	}
	return retryOrDeadLetter(in, jobErr, retryAfter)
}

// limitWaitCode is the job error of a job waiting for a provider limit.
const limitWaitCode = "PROVIDER_LIMIT_WAIT"

// waitForProvider requeues a job the provider's limits hold back until
// until, its attempt refunded, or dead-letters it when until passes its
// deadline.
func waitForProvider(in settleInput, until time.Time, jobErr *store.JobError) decision {
	if deadline := in.budgetStarted.Add(in.retry.Deadline); until.After(deadline) {
		d := deadLetter("deadline", fmt.Sprintf("the provider's limits hold the job past its deadline of %s; last error: %s", in.retry.Deadline, jobErr.Message))
		d.refund = true
		return d
	}
	msg := jobErr.Message
	if !strings.Contains(msg, "next try at") {
		msg = "rate limited by the provider (" + msg + "): next try at " + until.UTC().Format(time.RFC3339)
	}
	return decision{act: actTransition, to: store.JobStatusRetryWait, err: jobErr, at: &until, refund: true, message: msg}
}

func fail(jobErr *store.JobError) decision {
	jobErr.Retryable = false
	return decision{act: actTransition, to: store.JobStatusFailed, err: jobErr, message: "failed: " + jobErr.Code}
}

func deadLetter(kind, reason string) decision {
	return decision{
		act: actTransition, to: store.JobStatusDeadLettered, budget: kind,
		err:     &store.JobError{Code: budgetSpentCode, Message: reason},
		message: "dead-lettered: " + reason,
	}
}

// awaitReconcile parks a job whose call may or may not have happened. When
// the provider can look calls up, the job is due again after a backoff: the
// next claim is the reconciler, asking by provider key before any new call.
// Otherwise only ResolveJob settles it.
func awaitReconcile(in settleInput, jobErr *store.JobError) decision {
	d := decision{act: actTransition, to: store.JobStatusOutcomeUnknown, err: jobErr}
	if !in.canLookup {
		d.message = "outcome unknown: the provider cannot look calls up; settle with ResolveJob"
		return d
	}
	at := in.now.Add(in.retry.Wait(int(in.attempts), 0, in.jitter))
	d.at = &at
	d.message = "outcome unknown: the reconciler asks the provider by key at " + at.Format(time.RFC3339)
	return d
}

// retryOrDeadLetter retries after a backoff inside the attempts and
// deadline budgets, and dead-letters once either is spent.
func retryOrDeadLetter(in settleInput, jobErr *store.JobError, retryAfter time.Duration) decision {
	policy := in.retry
	if policy.Spent(int(in.attempts)) {
		return deadLetter("attempts", fmt.Sprintf("attempts spent: %d of %d; last error: %s", in.attempts, policy.MaxAttempts, jobErr.Message))
	}
	return retryAfterBackoff(in, int(in.attempts), jobErr, retryAfter)
}

// notTried requeues a job an attempt claimed but never started (a worker
// of another version): the attempt goes back to the budget, so a rolling
// deploy's old workers cannot dead-letter a new job, as a shutdown cannot.
// The backoff grows with the claims only to retry.NotTriedMaxStep: a mixed
// fleet's old workers may claim the job many times in a row, and each such
// claim must not push the job's next chance at a worker of its version
// further off. The deadline still ends the wait for a worker that never
// comes.
func notTried(in settleInput, jobErr *store.JobError) decision {
	d := retryAfterBackoff(in, retry.NotTriedStep(int(in.claims)), jobErr, 0)
	d.refund = true
	return d
}

// retryAfterBackoff retries after the n-th backoff, or dead-letters when
// that retry would pass the deadline.
func retryAfterBackoff(in settleInput, n int, jobErr *store.JobError, retryAfter time.Duration) decision {
	policy := in.retry
	at := in.now.Add(policy.Wait(n, retryAfter, in.jitter))
	if deadline := in.budgetStarted.Add(policy.Deadline); at.After(deadline) {
		return deadLetter("deadline", fmt.Sprintf("the next retry (%s) would pass the deadline of %s; last error: %s", at.Format(time.RFC3339), policy.Deadline, jobErr.Message))
	}
	return decision{act: actTransition, to: store.JobStatusRetryWait, err: jobErr, at: &at, message: "retrying after " + jobErr.Code}
}

// settle records how the attempt ended: decide, then write what it decided,
// fenced by the lease. A write that fails is itself decided on (a publish
// or an approval that meets an outage, say), a bounded number of times.
func (r *run) settle(ctx, jobCtx context.Context, err error) {
	if err == nil {
		return
	}
	// The job's own context may be cancelled; the settling write must still
	// happen, bounded.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()

	for range 3 {
		in := r.settleInput(jobCtx, ctx.Err() != nil, err)
		d := decide(in)
		if d.act != actPublish && !d.leaseLost {
			// What the attempt computed is kept, before it settles: the
			// stages done need not run again.
			if ferr := r.buf.flush(wctx, nil); errors.Is(ferr, store.ErrLeaseLost) {
				d = decide(r.settleInput(jobCtx, ctx.Err() != nil, ferr))
			}
		}
		if err = r.apply(ctx, wctx, d, err); err == nil {
			return
		}
	}
	r.log.Error("settling the job kept failing; the lease will expire", "error", err)
}

func (r *run) settleInput(jobCtx context.Context, shuttingDown bool, err error) settleInput {
	in := settleInput{
		err: err, cause: context.Cause(jobCtx), shuttingDown: shuttingDown,
		now:      r.w.cfg.Now(),
		attempts: r.job.BudgetAttempts, budgetStarted: r.job.BudgetStartedAt,
		claims: r.job.Attempt, jitter: retry.Jitter(),
		canLookup: r.w.cfg.Provider.CanLookup(),
	}
	if r.p != nil {
		in.retry = r.p.Retry
		in.onUnknown = r.p.OnUnknown
	}
	return in
}

// apply writes what decide decided about err. It returns the error of a
// write that should itself be decided on; the others it logs.
func (r *run) apply(ctx, wctx context.Context, d decision, err error) error {
	switch d.act {
	case actNone:
		if d.logError {
			r.log.Error(d.message, "error", err)
		} else {
			r.log.Warn(d.message)
		}
		return nil
	case actPublish:
		return r.publish(wctx, nil)
	case actRequeueAfterOutage:
		r.requeueAfterOutage(ctx, err)
		return nil
	}
	_, err = r.w.cfg.Store.JobTransition(wctx, &store.JobTransitionParams{
		Lease: r.lease, To: d.to, Error: d.err, RunAfter: d.at, RefundAttempt: d.refund,
		Output: d.output, Message: d.message,
	})
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		r.log.Warn("lease lost before settling; another worker holds the job", "to", d.to)
	case err != nil && d.to == store.JobStatusAwaitingApproval:
		return err // the plan is not lost: decide again on the write's error
	case err != nil:
		r.log.Error("settling the job failed; the lease will expire", "to", d.to, "error", err)
	default:
		r.ended = attemptEnd{status: d.to, budget: d.budget}
		r.log.Info("job settled", "status", d.to, "message", d.message)
		r.w.signals.Settled.Signal(SettledSignal{JobID: r.job.ID, Status: d.to})
	}
	return nil
}
