package store

import (
	"context"
	"errors"
	"time"
)

// ErrRunCancelled: the run accepts no more items.
var ErrRunCancelled = errors.New("the run is cancelled")

// RunStore keeps runs: named groups of items of work (docs/architecture.md,
// "Runs"). Items join a run through JobSubmitMany (JobSubmitParams.RunID),
// in the write that creates or finds their job. Every method is scoped by
// tenant: another tenant's run is ErrNotFound.
type RunStore interface {
	// RunCreate creates a run, or returns the run its key created (Existing
	// set) when the fingerprint matches; another fingerprint is
	// ErrIdempotencyKeyReused. One atomic insert-or-return.
	RunCreate(ctx context.Context, params *RunCreateParams) (*RunCreateResult, error)

	// RunGet returns a run with its progress, read in one statement.
	RunGet(ctx context.Context, params *RunGetParams) (*Run, error)

	// RunList returns one page of the tenant's runs, newest first, each with
	// its progress.
	RunList(ctx context.Context, params *RunListParams) (*RunListResult, error)

	// RunItemGetMany returns the items of a run among the keys given, with
	// their jobs; keys not in the run are absent. Writes nothing.
	RunItemGetMany(ctx context.Context, params *RunItemGetManyParams) ([]*RunItem, error)

	// RunRetryFailures replays every failed or dead-lettered job of the run
	// as JobReplay would (fresh budget, checkpoints kept), with the key, in
	// one transaction. A replayed key answers the first call's count with
	// Replayed set and applies nothing; a key bound to another fingerprint
	// is ErrIdempotencyKeyReused.
	RunRetryFailures(ctx context.Context, params *RunRetryFailuresParams) (*RunOperationResult, error)

	// RunCancel marks the run cancelled (once; a repeat keeps the first
	// time) and cancels, as JobCancel would, every non-terminal job the run
	// created (outcome created), in one transaction. Jobs it reused are not
	// touched.
	RunCancel(ctx context.Context, params *RunCancelParams) (*RunOperationResult, error)
}

// Run is a named group of items of work.
type Run struct {
	ID             string
	Tenant         string
	IdempotencyKey string
	Fingerprint    string
	Name           string
	// Defaults of the run's items.
	Pipeline     string
	ModelProfile string
	Params       []byte // canonical JSON object
	Labels       map[string]string
	// ProviderBatch sends the items' LLM calls through the provider's batch
	// API: each item's model profile is replaced by its batch twin
	// (pipeline.Registry.BatchTwin).
	ProviderBatch bool
	CreatedAt     time.Time
	CancelledAt   *time.Time
	Progress      RunProgress
}

// RunProgress counts a run's items, read in one snapshot.
type RunProgress struct {
	// Seq is the sum of the items' jobs' last event seqs: it grows with
	// every transition and every item added.
	Seq      int64
	Items    int64
	ByStatus map[JobStatus]int64
	// Reused counts items that joined as no new work (deduplicated or
	// existing).
	Reused int64
	// Usage sums the usage of the run's computed (created) items.
	Usage JobUsage
	// FinishedRecently counts computed items terminal since the params'
	// RecentSince.
	FinishedRecently int64
}

// Terminal counts the items whose job is terminal.
func (p RunProgress) Terminal() int64 {
	var n int64
	for s, c := range p.ByStatus {
		if s.Terminal() {
			n += c
		}
	}
	return n
}

// Complete says whether the run has items and every one is terminal.
func (p RunProgress) Complete() bool { return p.Items > 0 && p.Terminal() == p.Items }

// RunItemOutcome is how an item joined its run.
type RunItemOutcome string

const (
	RunItemCreated      RunItemOutcome = "created"
	RunItemDeduplicated RunItemOutcome = "deduplicated"
	RunItemExisting     RunItemOutcome = "existing"
)

// RunItemOutcomeOf is the outcome recorded for an item answered o.
func RunItemOutcomeOf(o SubmitOutcome) RunItemOutcome {
	switch o {
	case OutcomeCreated:
		return RunItemCreated
	case OutcomeDeduplicated:
		return RunItemDeduplicated
	}
	return RunItemExisting
}

// RunItem is one item of a run and its job, without the job's params and
// labels (nil), as SubmitJobs answers a run's items.
type RunItem struct {
	RunID       string
	Key         string
	Fingerprint string
	Outcome     RunItemOutcome
	Job         *Job
}

// RunCreateParams is the input of RunCreate.
type RunCreateParams struct {
	ID             string // the id the run gets if this call creates it
	Tenant         string
	IdempotencyKey string
	Fingerprint    string
	Name           string
	Pipeline       string
	ModelProfile   string
	Params         []byte // canonical JSON object
	Labels         map[string]string
	ProviderBatch  bool
	// RecentSince bounds Progress.FinishedRecently of the run returned.
	RecentSince time.Time
}

// RunCreateResult is the run and whether the key had created it before.
type RunCreateResult struct {
	Run      *Run
	Existing bool
}

// RunGetParams names one run.
type RunGetParams struct {
	Tenant      string
	ID          string
	RecentSince time.Time // see RunProgress.FinishedRecently
	// WithoutProgress reads the run's row only (Progress stays zero): what
	// SubmitJobs needs, its defaults and whether it is cancelled, without
	// adding up every item of the run on every batch.
	WithoutProgress bool
}

// RunListParams selects one page of runs, newest first.
type RunListParams struct {
	Tenant      string
	Limit       int        // 0 means 20
	After       *JobCursor // the last run of the previous page
	RecentSince time.Time
}

// RunListResult is one page; Next is nil on the last page.
type RunListResult struct {
	Runs []*Run
	Next *JobCursor
}

// RunItemGetManyParams names items of a run by key.
type RunItemGetManyParams struct {
	Tenant string
	RunID  string
	Keys   []string
}

// RunRetryFailuresParams is the input of RunRetryFailures.
type RunRetryFailuresParams struct {
	Tenant      string
	RunID       string
	Message     string // the replayed jobs' event message
	Idempotency IdempotencyParams
	Actor       *Actor // when set, named on each replayed job's event
}

// RunCancelParams is the input of RunCancel.
type RunCancelParams struct {
	Tenant  string
	RunID   string
	Message string // the cancelled jobs' event message
	Actor   *Actor // when set, named on each cancelled job's event
}

// RunOperationResult is a run-wide call's result: the jobs it moved.
type RunOperationResult struct {
	Count    int
	Replayed bool // the key was seen before; nothing was applied now
}

// RunRetryMessage is the event message of a job RunRetryFailures replays.
func RunRetryMessage(reason string) string {
	return operatorEventMessage("replayed by RetryRunFailures", reason, nil)
}

// RunCancelMessage is the event message of a job RunCancel cancels.
func RunCancelMessage(reason string) string {
	return operatorEventMessage("cancelled with its run", reason, nil)
}

// RunListPage is the page of runs from one row more than limit, as
// JobListPage is for jobs.
func RunListPage(runs []*Run, limit int) *RunListResult {
	page, last, more := pageOf(runs, limit)
	res := &RunListResult{Runs: page}
	if more {
		res.Next = &JobCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return res
}

// RunListLimit is the page size of params: 20 by default, at most 100.
func (p *RunListParams) RunListLimit() int { return min(pageLimit(p.Limit, 20), 100) }

// RunCreateExisting answers a RunCreate whose key is bound to run.
func RunCreateExisting(fingerprint string, run *Run) (*RunCreateResult, error) {
	if run.Fingerprint != fingerprint {
		return nil, ErrIdempotencyKeyReused
	}
	return &RunCreateResult{Run: run, Existing: true}, nil
}

// RunOperationExisting answers a run-wide call whose key was taken before:
// the first call's result, or ErrIdempotencyKeyReused.
func RunOperationExisting(idem IdempotencyParams, fingerprint, runID, wantRunID string, result int) (*RunOperationResult, error) {
	if fingerprint != idem.Fingerprint || runID != wantRunID {
		return nil, ErrIdempotencyKeyReused
	}
	return &RunOperationResult{Count: result, Replayed: true}, nil
}

// RunProgressRow is one group of a run's items, by job status and whether
// they were reused: what each store's progress query returns.
type RunProgressRow struct {
	Status           JobStatus
	Reused           bool
	Items            int64
	Seq              int64
	Usage            JobUsage
	FinishedRecently int64
}

// RunProgressOf sums the groups into a run's progress: usage and recent
// finishes count computed items only.
func RunProgressOf(rows []RunProgressRow) RunProgress {
	p := RunProgress{ByStatus: map[JobStatus]int64{}}
	for _, r := range rows {
		p.Items += r.Items
		p.Seq += r.Seq
		p.ByStatus[r.Status] += r.Items
		if r.Reused {
			p.Reused += r.Items
			continue
		}
		p.Usage.PromptTokens += r.Usage.PromptTokens
		p.Usage.CompletionTokens += r.Usage.CompletionTokens
		p.Usage.CostMicros += r.Usage.CostMicros
		p.Usage.LLMCalls += r.Usage.LLMCalls
		p.FinishedRecently += r.FinishedRecently
	}
	return p
}
