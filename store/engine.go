package store

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"
)

// ErrLeaseLost: the job's lease is no longer (owner, attempt): another worker
// took it over, or the job was cancelled or finished. The caller must write
// nothing more for the job and stop.
var ErrLeaseLost = errors.New("lease lost")

// ErrTransitionRefused: the job's status does not allow the transition
// (docs/architecture.md, "Job lifecycle"). The server maps it to
// FAILED_PRECONDITION.
var ErrTransitionRefused = errors.New("transition not allowed from the job's status")

// TransitionRefusedError is ErrTransitionRefused (errors.Is matches it) with
// the status that refused it, so a caller need not read the job again.
type TransitionRefusedError struct {
	Status JobStatus
}

func (e *TransitionRefusedError) Error() string {
	return ErrTransitionRefused.Error() + ": the job is " + string(e.Status)
}

func (e *TransitionRefusedError) Is(target error) bool { return target == ErrTransitionRefused }

// EngineStore is what workers need: claiming under leases, fenced
// checkpoints, the LLM journal and fenced transitions. Every method that
// takes a Lease writes only while the job's (lease_owner, attempt) still
// equal it, in the same statement or transaction as the check; otherwise it
// returns ErrLeaseLost and writes nothing.
type EngineStore interface {
	// JobClaim claims up to Limit runnable jobs for Owner, oldest first, in one
	// short transaction (FOR UPDATE SKIP LOCKED): queued jobs, retry_wait jobs
	// whose RunAfter has passed, running jobs whose lease expired (a
	// takeover), and outcome_unknown jobs whose RunAfter is set and has passed
	// (the reconciler: the worker asks the provider by key before calling
	// again; without RunAfter only ResolveJob settles such a job). "Oldest" is
	// when the job became claimable: created_at, RunAfter, or the expired
	// lease_until. Each claimed job becomes running with lease_owner = Owner,
	// lease_until = now + LeaseDuration, attempt + 1, budget attempts + 1,
	// RunAfter cleared, and gets a running event whose message names the
	// previous owner on a takeover, or is "reconciling an unknown outcome"
	// for an outcome_unknown job. The jobs are returned oldest created first;
	// no runnable job is an empty result, not an error.
	JobClaim(ctx context.Context, params *JobClaimParams) ([]*Job, error)

	// DocumentGet returns a document's bytes by tenant and sha256.
	DocumentGet(ctx context.Context, params *DocumentGetParams) ([]byte, error)

	// CheckpointList returns the checkpoints of one job in lifecycle order of
	// their stage, then by chunk (-1, the whole stage, first).
	CheckpointList(ctx context.Context, params *CheckpointListParams) ([]*Checkpoint, error)

	// CheckpointGetByStageKey is the decision cache: a succeeded checkpoint
	// with this stage key in any job of the tenant, or ErrNotFound.
	CheckpointGetByStageKey(ctx context.Context, params *CheckpointGetByStageKeyParams) (*Checkpoint, error)

	// LLMAttemptRecord journals one LLM attempt and adds its billed usage to
	// the job (tokens, cost, one LLM call, budget tokens). It is not fenced: an
	// attempt that happened is a fact, whoever holds the lease now. The store
	// assigns ID and CreatedAt and takes Tenant from the job; an unknown job
	// is ErrNotFound. A bill is identified by the provider's request id (by
	// the provider key when there is none), and an attempt is stored Billed
	// only when no billed attempt of the job has its bill identity: a worker
	// that lost its lease and journals the answer it saw, or a retry the
	// provider answered from its idempotency store (same request id), never
	// counts a bill twice, while a provider that bills a retry again (a new
	// request id) is counted again. With Fence set the write is fenced
	// instead: written only while the lease holds the job (its owner and
	// attempt, the job running), otherwise nothing and ErrLeaseLost — the
	// rows that steer a later attempt (a provider batch's intent, its
	// outcome) are never written by a stale one.
	LLMAttemptRecord(ctx context.Context, params *LLMAttemptRecordParams) error

	// LLMAttemptList returns a job's journal, oldest first.
	LLMAttemptList(ctx context.Context, params *LLMAttemptListParams) ([]*LLMAttempt, error)

	// JobComputedSuccessGet returns the computed success of a dedup key in the
	// tenant, or ErrNotFound.
	JobComputedSuccessGet(ctx context.Context, params *JobComputedSuccessGetParams) (*Job, error)

	// JobPublishMany is the published stage, the completer's write. Each
	// job is published as one fenced write: its Checkpoints first (as
	// CheckpointWriteMany writes them), then output, status succeeded,
	// stage published, finished_at, its event and its job.succeeded outbox
	// event (see DeliveryStore). When another job of the tenant already
	// computed the same dedup key it publishes that job's output instead,
	// with deduplicated_from set and that job's id in the event's message;
	// this holds for concurrent publishers of one key too, so no item is
	// ErrDuplicateComputation. All in one statement on Postgres and one
	// write transaction on SQLite. Each job is fenced on its own lease: a job whose lease is gone
	// is answered ErrLeaseLost and writes nothing, and the others commit. A
	// job the store refuses for another reason fails alone too. Items answer
	// Jobs in order; the error is the batch's (the store is down), and then
	// none was written. A job may appear once in a batch.
	JobPublishMany(ctx context.Context, params *JobPublishManyParams) (*JobPublishManyResult, error)

	// JobClaimWork is JobClaim that also returns what a claimed job's first
	// stages need: its document's bytes and, for a job that ran before
	// (attempt > 1), its checkpoints, each read once for the whole batch, so
	// that the stages start without a round trip of their own.
	JobClaimWork(ctx context.Context, params *JobClaimParams) ([]*JobWork, error)

	// CheckpointGetByStageKeys is CheckpointGetByStageKey for many keys in
	// one read: for each key that has a succeeded checkpoint in any job of
	// the tenant, the newest one, keyed by stage key (keys without one are
	// absent); and, when DedupKey is set, JobComputedSuccessGet's answer
	// in the same read: the id of the job that computed it, or "".
	CheckpointGetByStageKeys(ctx context.Context, params *CheckpointGetByStageKeysParams) (*CheckpointGetByStageKeysResult, error)

	// CheckpointWriteMany writes several checkpoints of one job, in order,
	// fenced by the lease, in one statement (Postgres) or one write
	// transaction (SQLite). A write for a (job, stage, chunk) that already
	// has a checkpoint replaces it; one with AdvanceStage makes Stage the
	// job's stage and appends a running event. When Attempt is set it is journaled in the same
	// statement exactly as LLMAttemptRecord journals it, and, like that
	// method, unfenced: with the lease lost the attempt is still journaled
	// (its billed usage added), no checkpoint is written, and the answer is
	// ErrLeaseLost. So an LLM answer and its chunk's checkpoint commit
	// together: the journal is never behind a checkpoint that trusts a bill.
	// Stage, when set, moves the job's stage in the same fenced write
	// without an event.
	CheckpointWriteMany(ctx context.Context, params *CheckpointWriteManyParams) error

	// JobHeartbeatMany extends every lease of Leases to now + LeaseDuration
	// in one statement. Lost lists the leases no longer held;
	// CancelRequested the jobs (by id) whose cancel was requested, which is
	// how a cancel reaches a running worker.
	JobHeartbeatMany(ctx context.Context, params *JobHeartbeatManyParams) (*JobHeartbeatManyResult, error)

	// JobTransition moves a running job to To (retry_wait, failed,
	// dead_lettered, outcome_unknown, awaiting_approval, cancelled), fenced by
	// the lease, appending its event; it clears the lease. Any other To is
	// ErrTransitionRefused and writes nothing; retry_wait needs RunAfter.
	// failed, dead_lettered and cancelled set FinishedAt. The event's message
	// is Message, followed by "code: message" of Error when set.
	JobTransition(ctx context.Context, params *JobTransitionParams) (*Job, error)

	// OutboxList returns outbox rows of a job (tests and the relay).
	OutboxList(ctx context.Context, params *OutboxListParams) ([]*OutboxEvent, error)
}

// Lease identifies a worker's hold on a job: the fencing token.
type Lease struct {
	JobID   string
	Owner   string
	Attempt int32
}

type JobClaimParams struct {
	Owner         string
	Limit         int
	LeaseDuration time.Duration
	// Now, when set, is the time the claim runs at: what is due by then
	// is claimable (an expired lease, a passed RunAfter) and leases last
	// until Now + LeaseDuration. Nil takes the database's clock, which is
	// what production does: one clock for every process. Tests set it to
	// make leases expire without waiting.
	Now *time.Time
}

type DocumentGetParams struct {
	Tenant string
	SHA256 string
}

// Checkpoint is one stage's (or one chunk's) recorded result.
type Checkpoint struct {
	JobID       string
	Tenant      string
	Stage       JobStage
	Chunk       int32 // -1 for the stage as a whole
	StageKey    string
	CodeVersion string
	Attempt     int32
	Output      []byte
	// ReusedFrom is the job whose checkpoint of the same stage key the
	// decision cache served; empty when this job computed the result.
	ReusedFrom string
	CreatedAt  time.Time
}

type CheckpointListParams struct {
	JobID string
}

type CheckpointGetByStageKeyParams struct {
	Tenant   string
	StageKey string
}

// LLMOutcome is how one LLM attempt ended, as journaled.
type LLMOutcome string

const (
	LLMOutcomeSucceeded      LLMOutcome = "succeeded"
	LLMOutcomeRateLimited    LLMOutcome = "rate_limited"
	LLMOutcomeUnavailable    LLMOutcome = "unavailable"
	LLMOutcomeInvalidRequest LLMOutcome = "invalid_request"
	LLMOutcomeOutcomeUnknown LLMOutcome = "outcome_unknown"
	LLMOutcomeInvalidOutput  LLMOutcome = "invalid_output"
	LLMOutcomeCancelled      LLMOutcome = "cancelled"
)

// LLMAttempt is one journaled LLM call.
type LLMAttempt struct {
	ID                int64
	JobID             string
	Tenant            string
	JobAttempt        int32
	Stage             JobStage
	Chunk             int32
	ProviderKey       string
	Model             string
	Outcome           LLMOutcome
	Billed            bool // counted in the job's usage
	PromptTokens      int64
	CompletionTokens  int64
	CostMicros        int64
	LatencyMillis     int64
	ProviderRequestID string
	Error             string
	CreatedAt         time.Time
	// PriceClass is the price the call was billed at; empty records
	// PriceClassOnline.
	PriceClass PriceClass
}

// PriceClass is the price a provider bills a call at (docs/architecture.md,
// "Provider batches").
type PriceClass string

const (
	// PriceClassOnline: one HTTP call answered at once, the full price.
	PriceClassOnline PriceClass = "online"
	// PriceClassBatch: a line of a provider batch, the batch price.
	PriceClassBatch PriceClass = "batch"
)

// Or returns c, or PriceClassOnline when c is empty.
func (c PriceClass) Or() PriceClass {
	if c == "" {
		return PriceClassOnline
	}
	return c
}

type LLMAttemptRecordParams struct {
	Attempt LLMAttempt
	// Fence, when set, writes the attempt only while this lease holds the
	// job (see LLMAttemptRecord).
	Fence *Lease
}

type LLMAttemptListParams struct {
	JobID string
}

type JobComputedSuccessGetParams struct {
	Tenant   string
	DedupKey string
}

// OutboxEvent is one event to deliver outside the database, written in the
// transaction of the change it announces. EventID is stable per (job, event
// type, the job's generation), so a redelivery carries the same id.
type OutboxEvent struct {
	ID        int64
	EventID   string
	Tenant    string
	JobID     string
	Pipeline  string
	EventType string
	Payload   []byte // JSON, envelope v1; the same bytes on every delivery
	CreatedAt time.Time
	// RoutedAt is when a relay made the event's deliveries; nil before.
	RoutedAt *time.Time
}

type JobPublishParams struct {
	Lease   Lease
	Output  []byte
	Message string
	// Checkpoints are written, fenced by Lease, before the job is
	// published, with their events before the published one.
	Checkpoints []StageCheckpoint
}

type JobPublishManyParams struct {
	Jobs []*JobPublishParams
}

type JobPublishManyResult struct {
	Items []JobPublishItem // one per job, in order
}

// JobPublishItem answers one job of a JobPublishMany call.
type JobPublishItem struct {
	Job *Job  // the published job; nil when Err is set
	Err error // ErrLeaseLost, or why the store refused this job alone
}

// JobWork is a claimed job with what its first stages read.
type JobWork struct {
	Job      *Job
	Document []byte // nil: not read, the worker reads it
	// Checkpoints of the job, in CheckpointList's order, when
	// CheckpointsRead; a first attempt has none and reads none.
	Checkpoints     []*Checkpoint
	CheckpointsRead bool
}

type CheckpointGetByStageKeysParams struct {
	Tenant    string
	StageKeys []string
	DedupKey  string // optional
}

type CheckpointGetByStageKeysResult struct {
	Checkpoints map[string]*Checkpoint // by stage key
	ComputedBy  string                 // the job that computed DedupKey's success; "": none
}

// StageCheckpoint is one checkpoint written with another fenced write
// (CheckpointWriteMany, JobPublishMany), fenced by that write's lease.
type StageCheckpoint struct {
	Stage        JobStage
	Chunk        int32 // -1 for the stage as a whole
	StageKey     string
	CodeVersion  string
	Output       []byte
	ReusedFrom   string
	AdvanceStage bool
	Message      string // of the event when AdvanceStage
}

type CheckpointWriteManyParams struct {
	Lease       Lease
	Checkpoints []StageCheckpoint
	// Attempt, when set, is journaled in the same write, unfenced
	// (LLMAttemptRecord).
	Attempt *LLMAttempt
	// Stage, when set and no checkpoint of the write advances the stage,
	// becomes the job's stage, fenced, with no event: a stage-only advance
	// carried in the write (the worker never moves a job's stage back).
	Stage JobStage
}

// CheckpointBatchWriter is what a store offers beside EngineStore when it
// writes several jobs' CheckpointWriteMany at once (storepg, storesqlite):
// the worker's checkpoint writer (docs/architecture.md, "The batched
// engine"). A store without it, or a wrapper of one, gets one write per job.
type CheckpointBatchWriter interface {
	// CheckpointWriteBatch is CheckpointWriteMany for each of Writes, in
	// one transaction (Postgres: the writes' statements pipelined in one
	// round trip; SQLite: one write transaction, a savepoint each). Each
	// write is journaled and fenced on its own exactly as
	// CheckpointWriteMany does it: one whose lease is gone still journals
	// its attempt and is answered ErrLeaseLost, and the others commit; one
	// the store refuses for another reason fails alone too (the batch is
	// then written write by write). Errs answers Writes in order; the error
	// is the batch's (the store is down), and then none is known written.
	// A job may appear once in a batch.
	CheckpointWriteBatch(ctx context.Context, params *CheckpointWriteBatchParams) (*CheckpointWriteBatchResult, error)
}

type CheckpointWriteBatchParams struct {
	Writes []*CheckpointWriteManyParams
}

type CheckpointWriteBatchResult struct {
	Errs []error // by write: nil, ErrLeaseLost, ErrNotFound (the job is gone), or another
}

type JobHeartbeatManyParams struct {
	Leases        []Lease
	LeaseDuration time.Duration
	// Now, when set, is the time the leases are extended from; nil takes
	// the database's clock. See JobClaimParams.Now.
	Now *time.Time
}

type JobHeartbeatManyResult struct {
	Lost            []Lease
	CancelRequested []string // job ids
}

type JobTransitionParams struct {
	Lease    Lease
	To       JobStatus
	Error    *JobError  // recorded on the job; nil clears nothing
	RunAfter *time.Time // retry_wait: when it is due; outcome_unknown: when the reconciler may claim it (nil: only ResolveJob settles it)
	// Output, for awaiting_approval: the planned output shown for review.
	Output  []byte
	Message string
	// RefundAttempt gives the attempt back to the budget: the worker is
	// shutting down, so the work was interrupted, not tried, or the worker
	// runs another version of the job's pipeline. (The attempt itself, the
	// fencing token, still counts.)
	RefundAttempt bool
}

type OutboxListParams struct {
	JobID string
}

// CheckpointsInOrder sorts cps as CheckpointList returns them: in lifecycle
// order of their stage, then by chunk (-1 first).
func CheckpointsInOrder(cps []*Checkpoint) []*Checkpoint {
	slices.SortFunc(cps, func(a, b *Checkpoint) int {
		return cmp.Or(cmp.Compare(slices.Index(stageOrder, a.Stage), slices.Index(stageOrder, b.Stage)), cmp.Compare(a.Chunk, b.Chunk))
	})
	return cps
}
