package clientsdk

import (
	"context"
	"iter"

	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// MaxBatch is the most items one SubmitJobs call takes; SubmitMany splits
// larger slices into calls of at most this many.
const MaxBatch = 1000

// Run is a group of items of work (RunService).
type Run = oncejobv1.Run

// SubmitItem is one item of SubmitMany: a request and, optionally, its
// idempotency key (default: SubmitKey(Request)).
type SubmitItem struct {
	Key     string
	Request *SubmitRequest
}

// ItemResult is SubmitMany's answer to one item: Job and Outcome, or Err
// (decoded like a call's error: *InvalidRequestError, *KeyReusedError,
// ...). Key is the key the item was sent with.
type ItemResult struct {
	Key     string
	Job     *Job
	Outcome oncejobv1.SubmitOutcome
	// AlreadyInRun: the item was in the run before this call.
	AlreadyInRun bool
	Err          error
}

// SubmitManyOption configures SubmitMany.
type SubmitManyOption func(*submitManyOptions)

type submitManyOptions struct {
	runID     string
	batchSize int
	call      []CallOption
}

// IntoRun submits the items into a run (CreateRun): they take its
// defaults, and the run counts them.
func IntoRun(runID string) SubmitManyOption {
	return func(o *submitManyOptions) { o.runID = runID }
}

// BatchSize sets the items per SubmitJobs call, 1 to MaxBatch (default).
func BatchSize(n int) SubmitManyOption {
	return func(o *submitManyOptions) { o.batchSize = min(max(n, 1), MaxBatch) }
}

// WithSubmitCallOptions applies call options (a retry policy) to each
// SubmitJobs call.
func WithSubmitCallOptions(opts ...CallOption) SubmitManyOption {
	return func(o *submitManyOptions) { o.call = append(o.call, opts...) }
}

// SubmitMany submits items with SubmitJobs, in calls of at most MaxBatch
// items, and answers each item, in order. Every item's key is fixed before
// the first call (the caller's, or SubmitKey of its request), and a call
// that fails as a whole (UNAVAILABLE, a lost answer, a deadline) is retried
// with the same keys, so a retry answers what was written EXISTING and
// never makes a second job; so does running the program again.
//
// The error returned is a whole call's that retries could not get past;
// the results of the calls before it are returned with it (items not
// reached have neither Job nor Err). An item's own refusal is in its Err.
func (c *Client) SubmitMany(ctx context.Context, items []SubmitItem, opts ...SubmitManyOption) ([]ItemResult, error) {
	o := submitManyOptions{batchSize: MaxBatch}
	for _, f := range opts {
		f(&o)
	}
	results := make([]ItemResult, len(items))
	req := make([]*oncejobv1.SubmitJobsItem, len(items))
	for i, it := range items {
		key := it.Key
		if key == "" {
			var err error
			if key, err = SubmitKey(it.Request); err != nil {
				return nil, err
			}
		}
		results[i].Key = key
		req[i] = &oncejobv1.SubmitJobsItem{IdempotencyKey: key, Request: it.Request}
	}
	co := c.callOptions(o.call)
	for start := 0; start < len(req); start += o.batchSize {
		end := min(start+o.batchSize, len(req))
		var resp oncejobv1.SubmitJobsResponse
		call := &oncejobv1.SubmitJobsRequest{RunId: o.runID, Items: req[start:end]}
		if err := c.call(ctx, oncejobv1.JobService_SubmitJobs_FullMethodName, call, &resp, "", co); err != nil {
			return results, err
		}
		for j, r := range resp.GetResults() {
			res := &results[start+j]
			res.Job, res.Outcome, res.AlreadyInRun = r.GetJob(), r.GetOutcome(), r.GetAlreadyInRun()
			if r.GetError() != nil {
				res.Err = decodeError(status.FromProto(r.GetError()).Err(), res.Key)
			}
		}
	}
	return results, nil
}

// RunKey derives the idempotency key of a CreateRun request: WorkID of kind
// "oncejob.run", version 1, over every field of the request. So the same
// run, asked for again with the same name and defaults (a client started
// again with the same arguments), is the same run; the same run with
// provider_batch (its items' calls through the provider's batch API) is
// another.
func RunKey(req *oncejobv1.CreateRunRequest) (string, error) {
	params := req.GetParams().AsMap()
	if params == nil {
		params = map[string]any{}
	}
	labels := map[string]any{}
	for k, v := range req.GetLabels() {
		labels[k] = v
	}
	fields := map[string]any{
		"name": req.GetName(), "pipeline": req.GetPipeline(), "model_profile": req.GetModelProfile(),
		"params": params, "labels": labels,
	}
	if req.GetProviderBatch() { // absent when false: the keys of runs without it stay as they were
		fields["provider_batch"] = true
	}
	return WorkID("oncejob.run", 1, fields)
}

// CreateRun creates a run, or returns the one its key created. The key is
// the caller's (WithIdempotencyKey) or RunKey(req). A request with
// ProviderBatch sends the items' LLM calls through the provider's batch
// API; a server whose provider has none refuses it (*InvalidRequestError,
// reason PROVIDER_BATCH_UNSUPPORTED).
func (c *Client) CreateRun(ctx context.Context, req *oncejobv1.CreateRunRequest, opts ...CallOption) (*Run, error) {
	o := c.callOptions(opts)
	key := o.key
	if key == "" {
		var err error
		if key, err = RunKey(req); err != nil {
			return nil, err
		}
	}
	var resp oncejobv1.CreateRunResponse
	err := c.call(ctx, oncejobv1.RunService_CreateRun_FullMethodName, req, &resp, key, o)
	return resp.GetRun(), err
}

// GetRun returns a run with its progress.
func (c *Client) GetRun(ctx context.Context, runID string, opts ...CallOption) (*Run, error) {
	var resp oncejobv1.GetRunResponse
	err := c.call(ctx, oncejobv1.RunService_GetRun_FullMethodName, &oncejobv1.GetRunRequest{RunId: runID}, &resp, "", c.callOptions(opts))
	return resp.GetRun(), err
}

// ListRunBatches returns the provider batches the calls of a run's items
// went into, oldest first: the provider's status, the run's lines in each,
// those answered and their cost.
func (c *Client) ListRunBatches(ctx context.Context, runID string, opts ...CallOption) ([]*oncejobv1.RunBatch, error) {
	var resp oncejobv1.ListRunBatchesResponse
	err := c.call(ctx, oncejobv1.RunService_ListRunBatches_FullMethodName, &oncejobv1.ListRunBatchesRequest{RunId: runID}, &resp, "", c.callOptions(opts))
	return resp.GetBatches(), err
}

// ListRuns iterates over the caller's runs, newest first.
func (c *Client) ListRuns(ctx context.Context, opts ...CallOption) iter.Seq2[*Run, error] {
	o := c.callOptions(opts)
	return func(yield func(*Run, error) bool) {
		req := &oncejobv1.ListRunsRequest{}
		for {
			var resp oncejobv1.ListRunsResponse
			if err := c.call(ctx, oncejobv1.RunService_ListRuns_FullMethodName, req, &resp, "", o); err != nil {
				yield(nil, err)
				return
			}
			for _, r := range resp.GetRuns() {
				if !yield(r, nil) {
					return
				}
			}
			if resp.GetNextPageToken() == "" {
				return
			}
			req.PageToken = resp.GetNextPageToken()
		}
	}
}

// WatchRun iterates over snapshots of a run's progress, each with a larger
// seq, and ends after one in which every item is terminal. A broken stream
// is resumed from the last seq yielded, on any replica, as Watch does.
func (c *Client) WatchRun(ctx context.Context, runID string, afterSeq int64, opts ...WatchOption) iter.Seq2[*Run, error] {
	o := c.watchOptions(opts)
	svc := oncejobv1.NewRunServiceClient(c.conn)
	return func(yield func(*Run, error) bool) {
		last := afterSeq
		err := reconnecting(ctx, *o.policy, func(ctx context.Context) (progress, stop bool, err error) {
			stream, err := svc.WatchRun(ctx, &oncejobv1.WatchRunRequest{RunId: runID, AfterSeq: last})
			if err != nil {
				return false, false, err
			}
			for {
				resp, err := stream.Recv()
				if err != nil {
					return progress, false, err
				}
				run := resp.GetRun()
				if run.GetProgress().GetSeq() <= last {
					continue
				}
				last, progress = run.GetProgress().GetSeq(), true
				if !yield(run, nil) {
					return true, true, nil
				}
			}
		})
		if err != nil {
			yield(nil, err)
		}
	}
}

// RetryRunFailures replays every failed and dead-lettered job of the run,
// each from its last good checkpoint. The key is the caller's or one made
// once for this call: a retry of the call replays nothing twice. It returns
// how many jobs the call replayed and the run after it.
func (c *Client) RetryRunFailures(ctx context.Context, req *oncejobv1.RetryRunFailuresRequest, opts ...CallOption) (*oncejobv1.RetryRunFailuresResponse, error) {
	var resp oncejobv1.RetryRunFailuresResponse
	err := c.operatorCall(ctx, oncejobv1.RunService_RetryRunFailures_FullMethodName, req, &resp, opts)
	return &resp, err
}

// CancelRun cancels a run and the jobs it created that are not terminal.
// Cancelling a cancelled run returns it.
func (c *Client) CancelRun(ctx context.Context, req *oncejobv1.CancelRunRequest, opts ...CallOption) (*oncejobv1.CancelRunResponse, error) {
	var resp oncejobv1.CancelRunResponse
	err := c.call(ctx, oncejobv1.RunService_CancelRun_FullMethodName, req, &resp, "", c.callOptions(opts))
	return &resp, err
}
