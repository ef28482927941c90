package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oncejob/oncejob/failpoint"
	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/store"
)

// unknownOutcomeCode is the job error of a call whose outcome is unknown.
const unknownOutcomeCode = "PROVIDER_OUTCOME_UNKNOWN"

// publish is the published stage: the pending checkpoints, the output,
// SUCCEEDED, its event and its outbox event (the store writes it) commit in
// one transaction, which the completer shares with the other jobs ready to
// publish. A nil output publishes the result another job computed for the
// same dedup key.
func (r *run) publish(ctx context.Context, output []byte) (err error) {
	_, end := r.w.cfg.Observer.StageStarted(ctx, r.job, store.JobStagePublished, -1)
	defer func() { end("computed", err) }()
	_, err = r.w.completer.publish(&store.JobPublishParams{
		Lease:       r.lease,
		Output:      output,
		Message:     "published",
		Checkpoints: r.pending,
	})
	if err != nil {
		return err
	}
	r.pending = nil
	r.settled = store.JobStatusSucceeded
	failpoint.Inject(failpoint.AfterPublishCommit)
	return nil
}

// settle records how the attempt ended: the job's next status, fenced by the
// lease. A worker that lost its lease writes nothing.
func (r *run) settle(ctx, jobCtx context.Context, err error) {
	if err == nil {
		return
	}
	cause := context.Cause(jobCtx)
	// The job's own context may be cancelled; the settling write must still
	// happen, bounded.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()

	if errors.Is(err, store.ErrLeaseLost) || errors.Is(cause, errLeaseLost) {
		r.log.Warn("lease lost: another worker holds the job; stopping without writing")
		return
	}
	if !errors.Is(err, errAlreadyComputed) {
		// What the attempt computed is kept, before it settles: the stages
		// done need not run again.
		if ferr := r.flush(wctx, nil); errors.Is(ferr, store.ErrLeaseLost) {
			r.log.Warn("lease lost: another worker holds the job; stopping without writing")
			return
		}
	}
	switch {
	case errors.Is(err, errAlreadyComputed):
		err = r.publish(wctx, nil)
		if err != nil {
			r.settle(ctx, jobCtx, err)
		}
		return
	case errors.Is(err, errCancelRequested) || errors.Is(cause, errCancelRequested):
		r.transition(wctx, store.JobStatusCancelled, nil, nil, "cancelled while running")
		return
	case ctx.Err() != nil:
		// Interrupted by this worker's shutdown, not tried: the attempt goes
		// back to the budget, so deploys cannot dead-letter a healthy job.
		now := r.w.cfg.Now()
		_, err := r.w.cfg.Store.JobTransition(wctx, &store.JobTransitionParams{
			Lease: r.lease, To: store.JobStatusRetryWait, RunAfter: &now, RefundAttempt: true,
			Message: "worker shut down; requeued",
		})
		if err != nil {
			r.log.Warn("requeueing on shutdown failed; the lease will expire", "error", err)
			return
		}
		r.settled = store.JobStatusRetryWait
		return
	}

	var await errAwaitApproval
	if errors.As(err, &await) {
		_, terr := r.w.cfg.Store.JobTransition(wctx, &store.JobTransitionParams{
			Lease: r.lease, To: store.JobStatusAwaitingApproval, Output: await.output,
			Message: "awaiting approval: the planned output is on the job",
		})
		if terr != nil {
			r.settle(ctx, jobCtx, terr)
			return
		}
		r.settled = store.JobStatusAwaitingApproval
		return
	}

	var budget *budgetError
	if errors.As(err, &budget) {
		r.budget = budget.kind
		r.transition(wctx, store.JobStatusDeadLettered, &store.JobError{Code: "BUDGET_SPENT", Message: budget.reason}, nil, "dead-lettered: "+budget.reason)
		return
	}
	var perm *permanentError
	if errors.As(err, &perm) {
		r.transition(wctx, store.JobStatusFailed, &store.JobError{Code: perm.code, Message: perm.err.Error()}, nil, "failed: "+perm.code)
		return
	}

	var retryable *retryableError
	if errors.As(err, &retryable) {
		r.retryOrDeadLetter(wctx, err, &store.JobError{Code: retryable.code, Message: retryable.err.Error(), Retryable: true})
		return
	}

	if errors.Is(err, store.ErrUnavailable) {
		r.requeueAfterOutage(ctx, err)
		return
	}
	if errors.Is(err, store.ErrInvalidRow) {
		// The store refused a value of this job's own (a model's output
		// holding \u0000, say): every attempt would write it again, so the
		// job fails now, with the reason, rather than through lease takeovers.
		// The database's own words stay in the log, as at the API.
		r.log.Warn("the store refused a value of the job; failing it", "error", err)
		r.transition(wctx, store.JobStatusFailed, &store.JobError{
			Code: "INVALID_DATA", Message: "the store refused a value of this job (see the server log); every attempt would write it again",
		}, nil, "failed: INVALID_DATA")
		return
	}

	class, ok := llm.ClassOf(err)
	if !ok {
		// Another infrastructure error: the lease expires and the job is
		// taken over, counting an attempt, so a failure this job causes
		// every time ends in its budget.
		r.log.Error("attempt ended by an infrastructure error; the lease will expire", "error", err)
		return
	}
	jobErr := &store.JobError{Code: "PROVIDER_" + strings.ToUpper(class.String()), Message: err.Error(), Retryable: llm.Retryable(class)}
	if class == llm.ClassOutcomeUnknown {
		jobErr.Code = unknownOutcomeCode
	}
	switch {
	case class == llm.ClassInvalidRequest:
		r.transition(wctx, store.JobStatusFailed, jobErr, nil, "failed: "+jobErr.Code)
	case class == llm.ClassOutcomeUnknown && r.p.OnUnknown == pipeline.OnUnknownReconcile:
		r.awaitReconcile(wctx, jobErr)
	default:
		r.retryOrDeadLetter(wctx, err, jobErr)
	}
}

// awaitReconcile parks a job whose call may or may not have happened. When
// the provider can look calls up, the job is due again after a backoff: the
// next claim is the reconciler, asking by provider key before any new call.
// Otherwise only ResolveJob settles it.
func (r *run) awaitReconcile(ctx context.Context, jobErr *store.JobError) {
	_, err := r.w.cfg.Provider.Lookup(ctx, r.lastKey)
	if errors.Is(err, llm.ErrLookupUnsupported) {
		r.transition(ctx, store.JobStatusOutcomeUnknown, jobErr, nil, "outcome unknown: the provider cannot look calls up; settle with ResolveJob")
		return
	}
	at := r.w.cfg.Now().Add(backoff(r.p.Retry, r.job.BudgetAttempts, 0))
	r.transition(ctx, store.JobStatusOutcomeUnknown, jobErr, &at, "outcome unknown: the reconciler asks the provider by key at "+at.Format(time.RFC3339))
}

func (r *run) retryOrDeadLetter(ctx context.Context, err error, jobErr *store.JobError) {
	policy := r.p.Retry
	if r.job.BudgetAttempts >= int32(policy.MaxAttempts) {
		reason := fmt.Sprintf("attempts spent: %d of %d; last error: %s", r.job.BudgetAttempts, policy.MaxAttempts, jobErr.Message)
		r.budget = "attempts"
		r.transition(ctx, store.JobStatusDeadLettered, &store.JobError{Code: "BUDGET_SPENT", Message: reason, Retryable: true}, nil, "dead-lettered: "+reason)
		return
	}
	var retryAfter time.Duration
	var le *llm.Error
	if errors.As(err, &le) {
		retryAfter = le.RetryAfter
	}
	at := r.w.cfg.Now().Add(backoff(policy, r.job.BudgetAttempts, retryAfter))
	if deadline := r.job.BudgetStartedAt.Add(policy.Deadline); at.After(deadline) {
		reason := fmt.Sprintf("the next retry (%s) would pass the deadline of %s; last error: %s", at.Format(time.RFC3339), policy.Deadline, jobErr.Message)
		r.budget = "deadline"
		r.transition(ctx, store.JobStatusDeadLettered, &store.JobError{Code: "BUDGET_SPENT", Message: reason, Retryable: true}, nil, "dead-lettered: "+reason)
		return
	}
	r.transition(ctx, store.JobStatusRetryWait, jobErr, &at, "retrying after "+jobErr.Code)
}

func (r *run) transition(ctx context.Context, to store.JobStatus, jobErr *store.JobError, runAfter *time.Time, message string) {
	_, err := r.w.cfg.Store.JobTransition(ctx, &store.JobTransitionParams{Lease: r.lease, To: to, Error: jobErr, RunAfter: runAfter, Message: message})
	switch {
	case errors.Is(err, store.ErrLeaseLost):
		r.log.Warn("lease lost before settling; another worker holds the job", "to", to)
	case err != nil:
		r.log.Error("settling the job failed; the lease will expire", "to", to, "error", err)
	default:
		r.settled = to
		r.log.Info("job settled", "status", to, "message", message)
	}
}
