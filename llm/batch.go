package llm

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// BatchProvider is a Provider that also takes calls through a batch API
// (OpenAI's Files and Batches): many calls in one file, answered within a
// window at a lower price. See docs/architecture.md, "Provider batches".
//
// A batch line is not an idempotent call: the provider computes and bills
// every line of every batch it was given, so two batches carrying the same
// calls are billed twice. What keeps a batch once is the caller's
// discipline, EnsureBatch: the input file and the batch carry a tag of the
// caller's, and both are looked up by it before either is created.
type BatchProvider interface {
	Provider
	// UploadBatchFile uploads the calls as an input file named name. The
	// error of a lost answer is of class ClassOutcomeUnknown: the file may
	// exist, and FindBatchFile finds it.
	UploadBatchFile(ctx context.Context, name string, calls []*Request) (*BatchFile, error)
	// FindBatchFile returns the newest input file named name uploaded at
	// or after since, or ErrNotFound.
	FindBatchFile(ctx context.Context, name string, since time.Time) (*BatchFile, error)
	// DeleteBatchFile deletes an input file: a batch created from it
	// afterwards is refused by the provider, one created before keeps its
	// lines. A file already gone is no error.
	DeleteBatchFile(ctx context.Context, id string) error
	// CreateBatch creates a batch of the file's calls carrying metadata.
	// The error of a lost answer is of class ClassOutcomeUnknown: the batch
	// may exist, and FindBatch finds it by its metadata.
	CreateBatch(ctx context.Context, fileID string, metadata map[string]string) (*Batch, error)
	// FindBatch returns the newest batch created at or after since whose
	// metadata holds key = value, or ErrNotFound.
	FindBatch(ctx context.Context, key, value string, since time.Time) (*Batch, error)
	// GetBatch returns the batch's current state.
	GetBatch(ctx context.Context, id string) (*Batch, error)
	// CancelBatch asks the provider to cancel the batch; its lines not yet
	// run are never run nor billed. Cancelling a batch already finished is
	// no error: the batch is returned as it is.
	CancelBatch(ctx context.Context, id string) (*Batch, error)
	// BatchResults reads the output and error files of a finished batch:
	// one result per line that has one. Lines of an expired or cancelled
	// batch that never ran have a result of class ClassUnavailable whose
	// Expired is set, or no result at all.
	BatchResults(ctx context.Context, b *Batch) ([]BatchResult, error)
}

// BatchFile is an uploaded input file.
type BatchFile struct {
	ID       string
	Filename string
	Bytes    int64
}

// Batch statuses, OpenAI's.
const (
	BatchValidating = "validating"
	BatchFailed     = "failed"
	BatchInProgress = "in_progress"
	BatchFinalizing = "finalizing"
	BatchCompleted  = "completed"
	BatchExpired    = "expired"
	BatchCancelling = "cancelling"
	BatchCancelled  = "cancelled"
)

// Batch is a provider batch as the provider last showed it.
type Batch struct {
	ID           string
	Status       string
	InputFileID  string
	OutputFileID string
	ErrorFileID  string
	Metadata     map[string]string
	// Total, Completed and Failed are the provider's request counts.
	Total, Completed, Failed int
	CreatedAt, ExpiresAt     time.Time
	// Errors are the reasons a batch failed validation.
	Errors []string
}

// Finished reports whether the batch will change no more: completed,
// failed, expired or cancelled.
func (b *Batch) Finished() bool {
	switch b.Status {
	case BatchCompleted, BatchFailed, BatchExpired, BatchCancelled:
		return true
	}
	return false
}

// BatchResult is the answer to one line of a batch.
type BatchResult struct {
	// CustomID is the line's custom_id: the call's provider key.
	CustomID string
	// Response is the finished call, billed at the batch price; nil when
	// Err is set.
	Response *Response
	// Err is the line's failure, classified as an online answer of the
	// same status would be; a line the batch's window closed on first is
	// ClassUnavailable with Expired set.
	Err *Error
	// Expired reports a line that never ran because the batch expired.
	Expired bool
}

var (
	// ErrBatchRevoked is returned by EnsureBatch when the provider refused
	// the create because the tag's input file is gone: deleted by
	// RevokeBatch, so whoever deleted it may send the calls again.
	ErrBatchRevoked = errors.New("llm: the batch's input file was revoked before the create")
	// ErrBatchUnsupported is returned when the provider has no batch API.
	ErrBatchUnsupported = errors.New("llm: provider has no batch API (OpenAI's Files and Batches endpoints); provider_batch needs one")
)

// BatchesOf returns p's batch API, or an error that says why there is none:
// the option provider_batch is refused with it.
func BatchesOf(p Provider) (BatchProvider, error) {
	bp, ok := p.(BatchProvider)
	if !ok {
		return nil, ErrBatchUnsupported
	}
	if s, ok := p.(interface{ BatchesSupported() bool }); ok && !s.BatchesSupported() {
		return nil, ErrBatchUnsupported
	}
	return bp, nil
}

// BatchWindow is the completion window of a batch: the provider answers
// every line within it, or expires the batch.
const BatchWindow = 24 * time.Hour

// TagKey is the metadata key whose value names one batch of the caller's.
const TagKey = "oncejob_batch"

// EnsureHooks are called between the steps of EnsureBatch: for failpoints,
// and for the caller's fence before the create.
type EnsureHooks struct {
	// AfterUpload runs once the input file exists, before the batch is
	// created.
	AfterUpload func()
	// BeforeCreate, when set, runs just before the create and returns the
	// context the create runs under (a deadline: the time the caller may
	// still create the batch) and its cancel; an error creates nothing.
	BeforeCreate func(ctx context.Context) (context.Context, context.CancelFunc, error)
}

// EnsureBatch returns the batch tagged tag, creating it from calls only if
// the provider holds none: it looks for the batch by its metadata, then for
// the input file by its name (the tag), uploads the file only when there is
// none, and creates the batch only when the lookups found none. since
// bounds the lookups: no batch or file of this tag exists before it.
//
// A crash, or a lost answer, at any point leaves the provider with at most
// one file and one batch of the tag, found by the next call, provided the
// next call is made with the same tag: so one tag must always name the same
// calls. A lost answer to an upload or a create is retried through the
// lookups by the caller calling EnsureBatch again. A create that failed
// other than by a refusal (invalid, rate limited) may still land later, so
// the tag is revoked (RevokeBatch) before the error is returned: the next
// call finds a batch that landed, or uploads the calls again, and a create
// landing after the revoke is refused. Left open: a revoke that fails too
// (its error is in the one returned).
func EnsureBatch(ctx context.Context, p BatchProvider, tag string, since time.Time, calls []*Request, metadata map[string]string, hooks EnsureHooks) (*Batch, error) {
	if tag == "" || len(calls) == 0 {
		return nil, errors.New("llm: EnsureBatch needs a tag and at least one call")
	}
	b, err := p.FindBatch(ctx, TagKey, tag, since)
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("look the batch up: %w", err)
	}
	name := tag + ".jsonl"
	f, err := p.FindBatchFile(ctx, name, since)
	if errors.Is(err, ErrNotFound) {
		f, err = p.UploadBatchFile(ctx, name, calls)
	}
	if err != nil {
		return nil, fmt.Errorf("input file: %w", err)
	}
	if hooks.AfterUpload != nil {
		hooks.AfterUpload()
	}
	md := map[string]string{TagKey: tag}
	for k, v := range metadata {
		if k != TagKey {
			md[k] = v
		}
	}
	cctx := ctx
	if hooks.BeforeCreate != nil {
		var cancel context.CancelFunc
		if cctx, cancel, err = hooks.BeforeCreate(ctx); err != nil {
			return nil, err
		}
		defer cancel()
	}
	b, err = p.CreateBatch(cctx, f.ID, md)
	if err != nil {
		class, ok := ClassOf(err)
		if ok && class == ClassInvalidRequest {
			if _, ferr := p.FindBatchFile(ctx, name, since); errors.Is(ferr, ErrNotFound) {
				return nil, fmt.Errorf("%w: %w", ErrBatchRevoked, err)
			}
		}
		if !ok || (class != ClassInvalidRequest && class != ClassRateLimited) {
			// The create may still be on its way (a deadline, a lost
			// answer, a proxy's timeout) and land after the next call has
			// looked and created from this file: two batches of the same
			// calls. Revoked, the tag's file is gone: a create that landed
			// is found by the next call's look, a later one is refused,
			// and the next call uploads the calls again.
			if rerr := RevokeBatch(ctx, p, tag, since); rerr != nil {
				return nil, fmt.Errorf("create the batch: %w (and its input file not deleted: %w)", err, rerr)
			}
		}
		return nil, fmt.Errorf("create the batch: %w", err)
	}
	return b, nil
}

// RevokeBatch deletes every input file of tag, so that no batch of the
// tag can be created from now on: a create sent before still lands (and
// FindBatch finds it), one that reaches the provider afterwards is refused
// (EnsureBatch returns ErrBatchRevoked). It is the fence at the provider
// for a holder that stalled between its last check and its create.
func RevokeBatch(ctx context.Context, p BatchProvider, tag string, since time.Time) error {
	name := tag + ".jsonl"
	deleted := map[string]bool{}
	for {
		f, err := p.FindBatchFile(ctx, name, since)
		// A file deleted already and still listed (a provider's listing
		// may lag its deletes) is gone: looking again would only spin.
		if errors.Is(err, ErrNotFound) || (err == nil && deleted[f.ID]) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("look the input file up: %w", err)
		}
		if err := p.DeleteBatchFile(ctx, f.ID); err != nil {
			return fmt.Errorf("delete the input file: %w", err)
		}
		deleted[f.ID] = true
	}
}
