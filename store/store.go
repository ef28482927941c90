// Package store defines the persistence contract of oncejob: the Store
// interface, its domain types and its sentinel errors. Implementations live in
// sibling packages (storepg for Postgres, storesqlite for the embedded
// default); store/storetest is the conformance suite every one of them passes.
//
// Methods are noun first and take one params struct, so adding a field breaks
// no caller. Errors returned are either the sentinels below (compare with
// errors.Is) or internal errors whose text must not reach a client.
package store

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Implementations map their driver's errors to these.
var (
	// ErrNotFound: no such row in the caller's tenant.
	ErrNotFound = errors.New("not found")
	// ErrIdempotencyKeyReused: the idempotency key is bound to a request with
	// another fingerprint.
	ErrIdempotencyKeyReused = errors.New("idempotency key reused with a different request")
	// ErrDuplicateComputation: another job of the tenant already computed a
	// success for the same dedup key; at most one may exist.
	ErrDuplicateComputation = errors.New("a computed success for this dedup key already exists")
	// ErrInvalidRow: the database refused a value it was given, to write
	// or to compare (a data exception or a check constraint: params that
	// are not JSON, a NUL byte in a text column, text that is no uuid). The
	// input is wrong, not the store; the same statement fails again, so it
	// is never retried: the server answers INVALID_ARGUMENT and a worker
	// fails the job whose data it is.
	ErrInvalidRow = errors.New("the database refused a value of the row")
)

// Store is oncejob's persistence. Every method is safe for concurrent use.
// Every job-touching method is scoped by tenant: a row of another tenant is
// ErrNotFound.
type Store interface {
	// JobSubmit creates a job for an idempotency key, or returns the job the
	// key already created. It is one atomic insert-or-return: of any number of
	// concurrent calls with one (tenant, method, key), exactly one creates.
	//
	// Three things can happen:
	//  1. The key is new: the document is stored (once per tenant and
	//     sha256), the job is inserted with its first event, and Outcome is
	//     OutcomeCreated; or, when a computed success exists for the dedup
	//     key, the job is inserted SUCCEEDED (stage PUBLISHED) with
	//     DeduplicatedFrom and that job's output, and Outcome is
	//     OutcomeDeduplicated.
	//  2. The key exists with the same fingerprint: the job it created is
	//     returned, Outcome is OutcomeExisting, nothing is written.
	//  3. The key exists with another fingerprint: ErrIdempotencyKeyReused,
	//     nothing is written.
	JobSubmit(ctx context.Context, params *JobSubmitParams) (*JobSubmitResult, error)

	// JobSubmitMany is JobSubmit for many submissions at once: one statement
	// on Postgres, one transaction of the single writer on SQLite, never one
	// transaction per submission. Each submission may have its own tenant,
	// method and key, and gets its own answer, in order, exactly as JobSubmit
	// would answer it alone: a job and an Outcome, or an Err
	// (ErrIdempotencyKeyReused, ErrInvalidRow, or an internal error). One
	// submission's failure never fails or undoes another's write.
	//
	// Submissions of one (tenant, method, key) in one call are one intent:
	// the first decides, the others are answered as its replays (the job
	// with OutcomeExisting, or ErrIdempotencyKeyReused when their
	// fingerprint differs from the key's). Concurrent calls that share keys
	// create one job per key, as concurrent JobSubmit calls do.
	//
	// The error returned is the whole call's (the store is unavailable):
	// then no submission has an answer, some may have been written, and a
	// retry with the same keys answers each as it now stands.
	JobSubmitMany(ctx context.Context, params *JobSubmitManyParams) (*JobSubmitManyResult, error)

	// JobGetByIdempotencyKey answers a submission from its key alone, and
	// writes nothing: the job the key created with OutcomeExisting, or
	// ErrIdempotencyKeyReused when the key is bound to another fingerprint,
	// or ErrNotFound when the key is free. Only a write (JobSubmitMany)
	// decides a free key, so a caller that finds it free must still submit.
	// The server asks it first, so that a replay never waits for a write.
	JobGetByIdempotencyKey(ctx context.Context, params *JobGetByIdempotencyKeyParams) (*JobSubmitResult, error)

	// JobGetByID returns one job of the tenant, or ErrNotFound.
	JobGetByID(ctx context.Context, params *JobGetByIDParams) (*Job, error)

	// JobList returns one page of the tenant's jobs, newest first.
	JobList(ctx context.Context, params *JobListParams) (*JobListResult, error)

	// JobEventList returns the job's events with seq > params.AfterSeq, in
	// seq order. A job of another tenant is ErrNotFound.
	JobEventList(ctx context.Context, params *JobEventListParams) ([]*JobEvent, error)

	// IdempotencyKeyDeleteExpired frees keys created before params.CreatedBefore
	// and returns how many it freed. The jobs stay.
	IdempotencyKeyDeleteExpired(ctx context.Context, params *IdempotencyKeyDeleteExpiredParams) (int64, error)

	// Close releases the store's resources.
	Close()
}

// JobStatus is where a job is in its lifecycle. The string is what is stored.
type JobStatus string

const (
	JobStatusQueued           JobStatus = "queued"
	JobStatusRunning          JobStatus = "running"
	JobStatusRetryWait        JobStatus = "retry_wait"
	JobStatusAwaitingApproval JobStatus = "awaiting_approval"
	JobStatusOutcomeUnknown   JobStatus = "outcome_unknown"
	JobStatusSucceeded        JobStatus = "succeeded"
	JobStatusFailed           JobStatus = "failed"
	JobStatusCancelled        JobStatus = "cancelled"
	JobStatusDeadLettered     JobStatus = "dead_lettered"
)

// Terminal reports whether no worker will move the job again on its own.
func (s JobStatus) Terminal() bool {
	switch s {
	case JobStatusSucceeded, JobStatusFailed, JobStatusCancelled, JobStatusDeadLettered:
		return true
	}
	return false
}

// JobStage is the last checkpoint a job has passed.
type JobStage string

const (
	JobStageUploaded      JobStage = "uploaded"
	JobStageTextExtracted JobStage = "text_extracted"
	JobStageChunksReady   JobStage = "chunks_ready"
	JobStageLLMDone       JobStage = "llm_done"
	JobStageValidated     JobStage = "validated"
	JobStagePublished     JobStage = "published"
)

// SubmitOutcome says what JobSubmit did.
type SubmitOutcome int

const (
	OutcomeCreated SubmitOutcome = iota + 1
	OutcomeExisting
	OutcomeDeduplicated
)

// Job is one run of a pipeline on one document.
type Job struct {
	ID               string
	Tenant           string
	IdempotencyKey   string
	DedupKey         string
	Pipeline         string
	PipelineVersion  int32
	PromptVersion    string
	ModelProfile     string
	Status           JobStatus
	Stage            JobStage
	Attempt          int32
	Output           []byte // JSON object, nil until published
	Error            *JobError
	DeduplicatedFrom string // empty unless deduplicated
	Usage            JobUsage
	DocumentSHA256   string // hex
	DocumentMedia    string
	DocumentName     string
	DocumentSize     int64
	// Params and Labels are the job's effective ones: for a run's item,
	// the run's under the item's own (its row holds only its own: see
	// JobSubmitParams.Params). Params is read only (it may be shared with
	// other jobs of the run).
	Params     []byte // JSON object, as the store writes it
	Labels     map[string]string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time

	// Engine state; zero until a worker first claims the job.
	LeaseOwner      string
	LeaseUntil      *time.Time
	RunAfter        *time.Time // retry_wait: not claimable before
	CancelRequested bool
	// The retry budget counts from BudgetStartedAt (submit, or the last
	// replay): BudgetAttempts claims and BudgetTokens billed tokens since.
	BudgetStartedAt time.Time
	BudgetAttempts  int32
	BudgetTokens    int64
	// Approved: an operator approved the job's planned output (pipelines
	// with require_approval); the next run publishes it.
	Approved bool
	// Traceparent is the W3C trace context the job was submitted under
	// (JobSubmitParams.Traceparent).
	Traceparent string
	// ClaimedFrom is set by JobClaim only: the status the job was claimed
	// from. Running is a lease takeover.
	ClaimedFrom JobStatus
	// RunID is the run whose item created the job; empty for a single job.
	RunID string
	// Priority places the job's LLM calls in the provider limits' fair
	// queue.
	Priority JobPriority
}

// JobPriority orders LLM calls waiting for a provider limit
// (docs/architecture.md, "Provider limits").
type JobPriority string

// The priorities: interactive calls go before batch calls, 8 to 1.
const (
	JobPriorityInteractive JobPriority = "interactive"
	JobPriorityBatch       JobPriority = "batch"
)

// JobError is the last error of a job.
type JobError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// JobUsage is what a job has cost so far.
type JobUsage struct {
	PromptTokens     int64
	CompletionTokens int64
	CostMicros       int64
	LLMCalls         int32
}

// JobSubmitParams is the input of JobSubmit. The caller computes every key.
type JobSubmitParams struct {
	// ID is the id the job gets if this call creates it.
	ID              string
	Tenant          string
	Method          string // the idempotency scope within the tenant
	IdempotencyKey  string
	Fingerprint     string
	DedupKey        string
	Pipeline        string
	PipelineVersion int32
	PromptVersion   string
	ModelProfile    string
	Document        []byte
	DocumentSHA256  string // hex of sha256(Document)
	DocumentMedia   string
	DocumentName    string
	// Params and Labels are what the job's row holds. For a run's item
	// they are the item's own, without the run's (which its row holds once,
	// and every read of the job puts under these: docs/architecture.md,
	// "Runs"); the keys are computed by the caller from the merged ones.
	Params []byte // canonical JSON object
	Labels map[string]string
	// RunID, when set, is the run (RunStore) the submission joins: the
	// store records the item (RunID, IdempotencyKey, Fingerprint) and the
	// job it is answered with — created, deduplicated or existing — in the
	// write that answers it, so a created job is never outside its run. An
	// item already in the run keeps its first record. The job it is
	// answered with comes without params and labels (nil), as SubmitJobs
	// answers a run's items, unless a submission outside a run in the same
	// call shares it.
	RunID string
	// Traceparent is the W3C trace context of the submitting call, kept on
	// the job so the work it causes joins the submitter's trace; empty:
	// none. Not part of the fingerprint: a replay from another trace is the
	// same request.
	Traceparent string
	// Priority is the job's (a created job's; an existing one keeps its
	// own). Empty: interactive outside a run, batch in one.
	Priority JobPriority
}

// PriorityOf is the priority a submission gets: its own, else batch for
// an item of a run and interactive for a single job. The stores keep
// interactive as NULL.
func (p *JobSubmitParams) PriorityOf() JobPriority {
	switch {
	case p.Priority != "":
		return p.Priority
	case p.RunID != "":
		return JobPriorityBatch
	}
	return JobPriorityInteractive
}

// JobSubmitResult is the job and what JobSubmit did.
type JobSubmitResult struct {
	Job     *Job
	Outcome SubmitOutcome
}

// JobSubmitManyParams is the input of JobSubmitMany.
type JobSubmitManyParams struct {
	// Jobs are the submissions, answered in this order. Each is a whole
	// JobSubmitParams: tenants, methods and keys may differ.
	Jobs []*JobSubmitParams
}

// JobSubmitManyResult holds one answer per submission, in their order.
type JobSubmitManyResult struct {
	Items []JobSubmitItem
}

// JobSubmitItem is JobSubmitMany's answer to one submission: Job and
// Outcome, or Err.
type JobSubmitItem struct {
	Job     *Job
	Outcome SubmitOutcome
	Err     error
}

// JobGetByIdempotencyKeyParams names a submission by its key, with the
// fingerprint its replay must have.
type JobGetByIdempotencyKeyParams struct {
	Tenant         string
	Method         string
	IdempotencyKey string
	Fingerprint    string
}

// JobGetByIDParams names one job.
type JobGetByIDParams struct {
	Tenant string
	ID     string
}

// JobListParams selects one page of jobs, newest first.
type JobListParams struct {
	Tenant   string
	Status   JobStatus // empty: any
	Pipeline string    // empty: any
	RunID    string    // empty: any; else only the run's items' jobs
	// Limit caps the page size; 0 means 100.
	Limit int
	// MaxBytes caps the bytes of the page past its first job (its params,
	// labels, output and error as text, plus 256 a job); 0 means
	// JobListBytesDefault. A page cut by it has a Next like one cut by
	// Limit.
	MaxBytes int64
	// After is the cursor of the last job of the previous page; nil for the
	// first page.
	After *JobCursor
}

// JobCursor is a position in the newest-first order of jobs.
type JobCursor struct {
	CreatedAt time.Time
	ID        string
}

// JobListResult is one page; Next is nil on the last page.
type JobListResult struct {
	Jobs []*Job
	// Bytes is the page's size as MaxBytes counts it.
	Bytes int64
	Next  *JobCursor
}

// JobEvent is one entry of a job's durable event log: the state the job
// moved to. Seq starts at 1 and has no gaps.
type JobEvent struct {
	JobID     string
	Seq       int32
	Status    JobStatus
	Stage     JobStage
	Attempt   int32
	Message   string
	CreatedAt time.Time
	// Actor is who made the event by an operator RPC; nil otherwise.
	Actor *Actor
	// NextAttemptAt is when the job is tried next, on an event that moved
	// it to retry_wait or outcome_unknown with a time; nil otherwise.
	NextAttemptAt *time.Time
}

// JobEventListParams selects the events of one job after a seq.
type JobEventListParams struct {
	Tenant   string
	JobID    string
	AfterSeq int32 // 0: from the first event
	// Limit caps the events returned; 0 means 1000.
	Limit int
}

// IdempotencyKeyDeleteExpiredParams bounds the janitor's sweep.
type IdempotencyKeyDeleteExpiredParams struct {
	CreatedBefore time.Time
	// Limit caps the rows freed in one call, so a sweep never holds long
	// locks; 0 means 1000.
	Limit int
}
