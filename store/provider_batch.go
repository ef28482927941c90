package store

import (
	"context"
	"time"
)

// ProviderBatchStore keeps what the workers saw of the provider batches
// they sent (docs/architecture.md, "Provider batches"), and shows a run the
// batches its calls went into. A batch may carry the calls of many
// tenants, so it is only ever read through a run's intent rows (the
// llm_attempts rows "provider batch <tag>" of the run's jobs).
type ProviderBatchStore interface {
	// ProviderBatchRecord inserts the batch of a tag, or updates its
	// provider id, status and expiry.
	ProviderBatchRecord(ctx context.Context, params *ProviderBatchRecordParams) error

	// ProviderBatchBillsRecord records the lines a finished batch billed,
	// by provider key, as read from its results; a line recorded before is
	// kept once.
	ProviderBatchBillsRecord(ctx context.Context, params *ProviderBatchBillsRecordParams) error

	// ProviderBatchListStale returns up to Limit batches not finished
	// (completed, failed, expired, cancelled) whose record no worker has
	// touched since StaleBefore, oldest first: their follower is gone.
	ProviderBatchListStale(ctx context.Context, params *ProviderBatchListStaleParams) ([]*ProviderBatch, error)

	// ProviderBatchJobs returns the jobs whose intent rows name the batch
	// of Tag, each with its status, in no order: every line of the batch
	// belongs to one of them. The batcher cancels a batch at the provider
	// only when each of them is cancelled.
	ProviderBatchJobs(ctx context.Context, params *ProviderBatchJobsParams) ([]*ProviderBatchJob, error)

	// RunBatchList returns the batches the calls of a run's computed items
	// went into, oldest first; none for a run of another tenant.
	RunBatchList(ctx context.Context, params *RunBatchListParams) ([]*RunBatch, error)
}

// BatchIntentPrefix starts the error text of an intent row: the row a
// call's attempt journals (outcome outcome_unknown) before the call is
// sent in the provider batch of a tag, its error BatchIntentPrefix + tag.
const BatchIntentPrefix = "provider batch "

// ProviderBatchRecordParams is a batch as the worker following it saw it.
type ProviderBatchRecordParams struct {
	// Tag names the batch in the intent rows of its calls.
	Tag string
	// BatchID is the provider's id of the batch.
	BatchID string
	// Status is the provider's (llm.BatchValidating, ...).
	Status    string
	CreatedAt time.Time
	ExpiresAt *time.Time
}

// ProviderBatchBillsRecordParams names a batch by its tag and the provider
// keys (custom_ids) of the lines it billed.
type ProviderBatchBillsRecordParams struct {
	Tag          string
	ProviderKeys []string
}

// ProviderBatchListStaleParams bounds ProviderBatchListStale.
type ProviderBatchListStaleParams struct {
	StaleBefore time.Time
	Limit       int
}

// ProviderBatch is a batch as its record holds it.
type ProviderBatch struct {
	Tag, BatchID, Status string
}

// ProviderBatchJobsParams names a batch by its tag.
type ProviderBatchJobsParams struct {
	Tag string
}

// ProviderBatchJob is a job with a call in a provider batch.
type ProviderBatchJob struct {
	JobID  string
	Status JobStatus
}

// RunBatchListParams names a run.
type RunBatchListParams struct {
	Tenant string
	RunID  string
}

// RunBatch is one provider batch as a run sees it: only its own calls.
type RunBatch struct {
	BatchID string
	Status  string
	// Lines counts the run's calls sent in the batch; AnsweredLines those
	// the batch answered (billed at the batch price), CostMicros their
	// cost.
	Lines, AnsweredLines, CostMicros int64
	// BilledLines counts the run's calls the provider billed in the batch,
	// as the batcher read them from its results: the provider's side of
	// AnsweredLines. A call billed by two batches counts in both, so the
	// sum over a run's batches shows a double bill the journal never saw.
	BilledLines          int64
	CreatedAt, UpdatedAt time.Time
	ExpiresAt            *time.Time
}
