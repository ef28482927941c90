package worker

import (
	"context"

	"github.com/oncejob/oncejob/store"
)

// Observer is told of a worker's moments, for metrics and traces (package
// telemetry implements it). The worker calls it at a few stable points: a
// job's start and end, each stage, each LLM call. Its methods must be quick
// and must not block the job; the functions they return are called exactly
// once.
type Observer interface {
	// JobStarted: a claim gave this worker the job. The context it returns
	// is the job's: what it carries (a trace span) reaches the calls below.
	// end is called when the attempt is over, with the status this worker
	// wrote (empty when it wrote none: the lease was lost, the store failed)
	// and, when the job was dead-lettered for its budget, which budget:
	// "attempts", "deadline" or "tokens".
	JobStarted(ctx context.Context, job *store.Job) (_ context.Context, end func(status store.JobStatus, budget string))
	// StageStarted: a stage (or one chunk of it, chunk >= 0) that this
	// job has no checkpoint of begins. end says where its output came from
	// ("cache": the decision cache, or "computed"), or the error that
	// stopped it.
	StageStarted(ctx context.Context, job *store.Job, stage store.JobStage, chunk int32) (_ context.Context, end func(source string, err error))
	// LLMCallStarted: a call to the provider (or a look-up by provider key)
	// begins; end gets the journaled attempt, whose Outcome is empty when
	// no call was made (the budget was spent first).
	LLMCallStarted(ctx context.Context, job *store.Job, model string) (_ context.Context, end func(attempt *store.LLMAttempt))
}

// nopObserver observes nothing: the default.
type nopObserver struct{}

func (nopObserver) JobStarted(ctx context.Context, _ *store.Job) (context.Context, func(store.JobStatus, string)) {
	return ctx, func(store.JobStatus, string) {}
}

func (nopObserver) StageStarted(ctx context.Context, _ *store.Job, _ store.JobStage, _ int32) (context.Context, func(string, error)) {
	return ctx, func(string, error) {}
}

func (nopObserver) LLMCallStarted(ctx context.Context, _ *store.Job, _ string) (context.Context, func(*store.LLMAttempt)) {
	return ctx, func(*store.LLMAttempt) {}
}
