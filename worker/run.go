package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/store"
)

// Causes of a job context's cancellation.
var (
	errLeaseLost       = errors.New("lease lost")
	errCancelRequested = errors.New("cancel requested")
)

// permanentError fails a job: no retry can help.
type permanentError struct {
	code string
	err  error
}

func (e *permanentError) Error() string { return e.code + ": " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(code string, format string, args ...any) error {
	return &permanentError{code: code, err: fmt.Errorf(format, args...)}
}

// errAlreadyComputed: another job of the tenant published this computation
// while this one ran; publishing now reuses its result.
var errAlreadyComputed = errors.New("computation already succeeded in another job")

// run is one claimed attempt of one job.
type run struct {
	w       *Worker
	job     *store.Job
	p       *pipeline.Pipeline
	profile pipeline.ModelProfile
	lease   store.Lease
	log     *slog.Logger

	// progress is where the attempt's stages stand.
	progress stageProgress
	// ahead is the decision cache's answers read before the first LLM
	// call.
	ahead readAhead
	// buf is what the attempt's next durable write carries.
	buf checkpointBuffer

	// ended is how the attempt ended, for the Observer.
	ended attemptEnd

	// calls is the attempt's side of the job's journal of LLM calls.
	calls callJournal
}

// attemptEnd is how an attempt ended: the status it wrote ("": none), and
// the budget a dead letter spent.
type attemptEnd struct {
	status store.JobStatus
	budget string
}

func (w *Worker) work(ctx context.Context, claimed *store.JobWork) {
	job := claimed.Job
	lease := store.Lease{JobID: job.ID, Owner: w.cfg.Owner, Attempt: job.Attempt}
	r := &run{
		w:     w,
		job:   job,
		lease: lease,
		log:   w.log.With("job_id", job.ID, "attempt", job.Attempt),

		progress: newStageProgress(claimed),
		ahead:    newReadAhead(),
		buf:      newCheckpointBuffer(w.cfg.Store, w.ckWriter, lease, job.Stage, w.cfg.LeaseDuration),
		calls:    newCallJournal(w.cfg.Store, job),
	}
	ctx, end := w.cfg.Observer.JobStarted(ctx, job)
	defer func() { end(r.ended.status, r.ended.budget) }()
	jobCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w.heartbeater.add(r.lease, cancel)
	defer w.heartbeater.remove(r.lease)

	err := r.prepare()
	if err == nil {
		err = r.stages(jobCtx)
	}
	r.settle(ctx, jobCtx, err)
}

// prepare checks what must hold before any stage runs.
func (r *run) prepare() error {
	if r.job.CancelRequested {
		return errCancelRequested
	}
	p, ok := r.w.cfg.Pipelines.Get(r.job.Pipeline)
	if !ok {
		return permanent("PIPELINE_UNKNOWN", "pipeline %q is not configured on this worker", r.job.Pipeline)
	}
	r.p = p
	profile, ok := r.w.cfg.Pipelines.Profile(r.job.ModelProfile)
	if !ok {
		return permanent("MODEL_PROFILE_UNKNOWN", "model profile %q is not configured on this worker", r.job.ModelProfile)
	}
	r.profile = profile
	if profile.ProviderBatch != nil && r.w.batcher == nil {
		return permanent("PROVIDER_BATCH_UNSUPPORTED", "model profile %q sends its calls through a provider batch: %v", r.job.ModelProfile, llm.ErrBatchUnsupported)
	}
	if p.Version != r.job.PipelineVersion || p.Prompt.Version != r.job.PromptVersion {
		// A rolling deploy: this worker runs another version of the pipeline.
		// Running the job here would publish another computation under the
		// job's dedup key; a worker with its version may take it. Nothing
		// was tried, so the claim costs the job no attempt.
		return &retryableError{code: "PIPELINE_VERSION_MISMATCH", notTried: true, err: fmt.Errorf(
			"the job needs %s version %d prompt %s; this worker has version %d prompt %s",
			p.Name, r.job.PipelineVersion, r.job.PromptVersion, p.Version, p.Prompt.Version)}
	}
	// Claims that only finish what a person or the reconciler released (an
	// approved plan, an unknown outcome to look up) cost no new work, so the
	// attempts budget does not stop them; it stops crash loops.
	released := r.job.Approved || (r.job.Error != nil && r.job.Error.Code == unknownOutcomeCode)
	if !released && r.job.BudgetAttempts > int32(p.Retry.MaxAttempts) {
		return &budgetError{"attempts", fmt.Sprintf("attempts spent: %d of %d (workers died or lost their leases)", r.job.BudgetAttempts-1, p.Retry.MaxAttempts)}
	}
	return nil
}

// retryableError is a failure outside the provider that a later attempt,
// maybe on another worker, may not have.
type retryableError struct {
	code string
	err  error
	// notTried: the attempt never started the job's work (a worker of
	// another version claimed it), so it goes back to the attempts budget;
	// the deadline still bounds how long the job waits for a worker that
	// can run it.
	notTried bool
}

func (e *retryableError) Error() string { return e.code + ": " + e.err.Error() }

// budgetError dead-letters a job. kind names the budget spent: attempts,
// deadline or tokens.
type budgetError struct{ kind, reason string }

func (e *budgetError) Error() string { return "budget spent: " + e.reason }

// checkBudget is called before anything that costs.
func (r *run) checkBudget() error {
	policy := r.p.Retry
	if d := time.Since(r.job.BudgetStartedAt); d > policy.Deadline {
		return &budgetError{"deadline", fmt.Sprintf("deadline of %s passed", policy.Deadline)}
	}
	if used := r.job.BudgetTokens + r.calls.billed(); used >= policy.MaxCostTokens {
		return &budgetError{"tokens", fmt.Sprintf("%d of %d tokens used", used, policy.MaxCostTokens)}
	}
	return nil
}
