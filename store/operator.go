package store

import "context"

// OperatorStore holds the transitions clients ask for by RPC: cancel,
// replay, resolve, approve. Each runs in one transaction with its event and,
// when Idempotency is set, with the idempotency key: a replayed key returns
// the job as it is now, with Replayed set, and applies nothing again. A
// transition the job's status does not allow is a *TransitionRefusedError
// (ErrTransitionRefused) naming the status, and writes nothing, the key
// included. Another tenant's job is ErrNotFound.
//
// With an Actor, the event the call appends names it, in the same
// transaction. A cancel asked of a running job, which moves no status,
// then appends an event of its own (the job as it is, with the message and
// the actor), so every operator action leaves its audit record in the
// job's events. Without an Actor that cancel appends nothing.
type OperatorStore interface {
	// JobCancel cancels a job. A job that no worker holds (queued,
	// retry_wait, awaiting_approval, outcome_unknown) becomes cancelled at
	// once; a running job gets cancel_requested, and its worker stops at its
	// next heartbeat and settles it cancelled. A cancelled job is returned
	// as it is; any other terminal job is ErrTransitionRefused.
	JobCancel(ctx context.Context, params *JobCancelParams) (*OperatorResult, error)

	// JobReplay queues a failed or dead-lettered job again with a fresh
	// budget (budget_started_at now, zero attempts and tokens), its error
	// cleared. Checkpoints are kept, so finished stages do not run again;
	// with FromStage set, the checkpoints of that stage and every later one
	// are deleted first, so they run again.
	JobReplay(ctx context.Context, params *JobReplayParams) (*OperatorResult, error)

	// JobResolve settles an outcome_unknown job by hand: To queued retries
	// it with a fresh budget (with the same provider keys, so a call the
	// provider finished is not billed again), To failed fails it with Error.
	JobResolve(ctx context.Context, params *JobResolveParams) (*OperatorResult, error)

	// JobApprove decides an awaiting_approval job: approved, it is queued to
	// publish (its checkpoints make that a publish only); rejected, it is
	// cancelled.
	JobApprove(ctx context.Context, params *JobApproveParams) (*OperatorResult, error)
}

// IdempotencyParams binds an operator call to a client's idempotency key.
type IdempotencyParams struct {
	Method      string
	Key         string
	Fingerprint string
}

// OperatorResult is the job after the call.
type OperatorResult struct {
	Job      *Job
	Replayed bool // the key was seen before; nothing was applied now
}

type JobCancelParams struct {
	Tenant      string
	ID          string
	Message     string
	Idempotency *IdempotencyParams // optional
	// Actor, when set, is recorded on the event the call appends (see
	// OperatorStore).
	Actor *Actor
}

type JobReplayParams struct {
	Tenant      string
	ID          string
	FromStage   JobStage // empty: resume from the last good checkpoint
	Message     string
	Idempotency *IdempotencyParams
	Actor       *Actor
}

type JobResolveParams struct {
	Tenant      string
	ID          string
	To          JobStatus // queued or failed
	Error       *JobError // with To failed
	Message     string
	Idempotency *IdempotencyParams
	Actor       *Actor
}

type JobApproveParams struct {
	Tenant      string
	ID          string
	Approve     bool
	Message     string
	Idempotency *IdempotencyParams
	Actor       *Actor
}

// OperatorTarget is what every operator call names beside its transition:
// the job, the key that makes the call idempotent, and the actor its event
// records. Each store's operator transaction takes it as it is.
type OperatorTarget struct {
	Tenant      string
	ID          string
	Idempotency *IdempotencyParams
	Actor       *Actor
}

// Target is the job, key and actor of the call.
func (p *JobCancelParams) Target() OperatorTarget {
	return OperatorTarget{Tenant: p.Tenant, ID: p.ID, Idempotency: p.Idempotency, Actor: p.Actor}
}

// Target is the job, key and actor of the call.
func (p *JobReplayParams) Target() OperatorTarget {
	return OperatorTarget{Tenant: p.Tenant, ID: p.ID, Idempotency: p.Idempotency, Actor: p.Actor}
}

// Target is the job, key and actor of the call.
func (p *JobResolveParams) Target() OperatorTarget {
	return OperatorTarget{Tenant: p.Tenant, ID: p.ID, Idempotency: p.Idempotency, Actor: p.Actor}
}

// Target is the job, key and actor of the call.
func (p *JobApproveParams) Target() OperatorTarget {
	return OperatorTarget{Tenant: p.Tenant, ID: p.ID, Idempotency: p.Idempotency, Actor: p.Actor}
}

// JobSettler is JobResolve and JobApprove over a store's Settle, which
// writes a settlement of the target in its dialect: each store embeds one.
type JobSettler struct {
	Settle func(ctx context.Context, target OperatorTarget, w *JobSettleWrite) (*OperatorResult, error)
}

// JobResolve implements OperatorStore.
func (j JobSettler) JobResolve(ctx context.Context, params *JobResolveParams) (*OperatorResult, error) {
	w, err := params.Write()
	if err != nil {
		return nil, err
	}
	return j.Settle(ctx, params.Target(), w)
}

// JobApprove implements OperatorStore.
func (j JobSettler) JobApprove(ctx context.Context, params *JobApproveParams) (*OperatorResult, error) {
	return j.Settle(ctx, params.Target(), params.Write())
}
