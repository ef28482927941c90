package clientsdk

import (
	"context"
	"fmt"
	"iter"
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/jobkey"
)

// The API's messages, under shorter names.
type (
	Job            = oncejobv1.Job
	Event          = oncejobv1.JobEvent
	Change         = oncejobv1.WatchJobsResponse
	SubmitRequest  = oncejobv1.SubmitJobRequest
	ListRequest    = oncejobv1.ListJobsRequest
	CancelRequest  = oncejobv1.CancelJobRequest
	ReplayRequest  = oncejobv1.ReplayJobRequest
	ResolveRequest = oncejobv1.ResolveJobRequest
	ApproveRequest = oncejobv1.ApproveJobRequest
)

// SubmitResult is what Submit did.
type SubmitResult struct {
	Job     *Job
	Outcome oncejobv1.SubmitOutcome
	// Key is the idempotency key the call used: the caller's, or the one
	// derived with SubmitKey.
	Key string
}

// Replayed reports whether the key had been seen before: the job is the
// one the first submission created (outcome EXISTING).
func (r *SubmitResult) Replayed() bool {
	return r.Outcome == oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING
}

// Deduplicated reports whether the job took its result from an identical
// computation that already existed (the same document through the same
// pipeline, prompt and model, under another key): no new generation ran,
// and Job.DeduplicatedFrom names the job that computed it. A replay of
// such a job reports it too.
func (r *SubmitResult) Deduplicated() bool {
	return r.Job.GetDeduplicatedFrom() != ""
}

// Submit submits a job once. The call's idempotency key is the caller's
// (WithIdempotencyKey) or SubmitKey(req); it is fixed before the first
// attempt and sent on every retry, so however often the call is retried —
// after a lost response, a broken connection, a deadline — and however
// often the program is restarted and submits the same request again, there
// is one job. A replay answers the first job with outcome EXISTING.
//
// Errors: *InvalidRequestError (a bad request or key), *KeyReusedError (the
// key was used for another request), *BudgetError (retries ran out), or
// another status as *StatusError.
func (c *Client) Submit(ctx context.Context, req *SubmitRequest, opts ...CallOption) (*SubmitResult, error) {
	o := c.callOptions(opts)
	key := o.key
	if key == "" {
		var err error
		if key, err = SubmitKey(req); err != nil {
			return nil, err
		}
	}
	var resp oncejobv1.SubmitJobResponse
	if err := c.call(ctx, oncejobv1.JobService_SubmitJob_FullMethodName, req, &resp, key, o); err != nil {
		return nil, err
	}
	return &SubmitResult{Job: resp.GetJob(), Outcome: resp.GetOutcome(), Key: key}, nil
}

// SubmitKey derives the idempotency key of a submission: WorkID of kind
// "oncejob.submit", version 1, over the request's fields as sent, without
// transport fields:
//
//	{"pipeline": ..., "document_sha256": hex sha256 of the document's bytes
//	 (a text document's UTF-8), "media_type": ..., "document_name": ...,
//	 "model_profile": ..., "params": {...}}
//
// These are the fields the server fingerprints, so the derived key never
// meets IDEMPOTENCY_KEY_REUSED; labels are not in it, so relabelling is the
// same intent.
func SubmitKey(req *SubmitRequest) (string, error) {
	doc := req.GetDocument()
	data := doc.GetData()
	if _, ok := doc.GetContent().(*oncejobv1.Document_Text); ok {
		if !utf8.ValidString(doc.GetText()) {
			// The server refuses it too; Python's str cannot hold it.
			return "", fmt.Errorf("oncejob: SubmitKey: the text document is not valid UTF-8")
		}
		data = []byte(doc.GetText())
	}
	params := req.GetParams().AsMap()
	if params == nil {
		params = map[string]any{}
	}
	return WorkID("oncejob.submit", 1, map[string]any{
		"pipeline":        req.GetPipeline(),
		"document_sha256": jobkey.DocumentSHA256(data),
		"media_type":      doc.GetMediaType(),
		"document_name":   doc.GetName(),
		"model_profile":   req.GetModelProfile(),
		"params":          params,
	})
}

// Get returns one job. A job that does not exist for the caller is
// ErrNotFound.
func (c *Client) Get(ctx context.Context, jobID string, opts ...CallOption) (*Job, error) {
	var resp oncejobv1.GetJobResponse
	err := c.call(ctx, oncejobv1.JobService_GetJob_FullMethodName, &oncejobv1.GetJobRequest{JobId: jobID}, &resp, "", c.callOptions(opts))
	return resp.GetJob(), err
}

// List iterates over every job req selects, newest first, fetching pages as
// it goes (req.PageSize per page). It stops at the first error, which it
// yields.
func (c *Client) List(ctx context.Context, req *ListRequest, opts ...CallOption) iter.Seq2[*Job, error] {
	o := c.callOptions(opts)
	return func(yield func(*Job, error) bool) {
		r := &ListRequest{}
		if req != nil {
			r = proto.CloneOf(req)
		}
		for {
			var resp oncejobv1.ListJobsResponse
			if err := c.call(ctx, oncejobv1.JobService_ListJobs_FullMethodName, r, &resp, "", o); err != nil {
				yield(nil, err)
				return
			}
			for _, j := range resp.GetJobs() {
				if !yield(j, nil) {
					return
				}
			}
			if resp.GetNextPageToken() == "" {
				return
			}
			r.PageToken = resp.GetNextPageToken()
		}
	}
}

// The operator calls below send an idempotency key on every attempt: the
// caller's (WithIdempotencyKey) or one made once for the call. A replayed
// key returns the job as it is now and applies nothing again. A request the
// job's status does not allow is *PreconditionError.

// Cancel cancels a job: at once if no worker holds it, else at the worker's
// next heartbeat. Cancelling a cancelled job returns it.
func (c *Client) Cancel(ctx context.Context, req *CancelRequest, opts ...CallOption) (*Job, error) {
	var resp oncejobv1.CancelJobResponse
	err := c.operatorCall(ctx, oncejobv1.JobService_CancelJob_FullMethodName, req, &resp, opts)
	return resp.GetJob(), err
}

// Replay queues a FAILED or DEAD_LETTERED job again with a fresh budget.
func (c *Client) Replay(ctx context.Context, req *ReplayRequest, opts ...CallOption) (*Job, error) {
	var resp oncejobv1.ReplayJobResponse
	err := c.operatorCall(ctx, oncejobv1.JobService_ReplayJob_FullMethodName, req, &resp, opts)
	return resp.GetJob(), err
}

// Resolve settles an OUTCOME_UNKNOWN job: retry it or fail it.
func (c *Client) Resolve(ctx context.Context, req *ResolveRequest, opts ...CallOption) (*Job, error) {
	var resp oncejobv1.ResolveJobResponse
	err := c.operatorCall(ctx, oncejobv1.JobService_ResolveJob_FullMethodName, req, &resp, opts)
	return resp.GetJob(), err
}

// Approve approves (publishes) or rejects (cancels) a job AWAITING_APPROVAL.
func (c *Client) Approve(ctx context.Context, req *ApproveRequest, opts ...CallOption) (*Job, error) {
	var resp oncejobv1.ApproveJobResponse
	err := c.operatorCall(ctx, oncejobv1.JobService_ApproveJob_FullMethodName, req, &resp, opts)
	return resp.GetJob(), err
}

func (c *Client) operatorCall(ctx context.Context, method string, req, reply proto.Message, opts []CallOption) error {
	o := c.callOptions(opts)
	key := o.key
	if key == "" {
		key = "oncejob-op-" + uuid.NewString() // once per call, never per attempt
	}
	return c.call(ctx, method, req, reply, key, o)
}

// call makes one logical unary call with the client's timeout, the key on
// every attempt, retries per the policy, and the error decoded.
func (c *Client) call(ctx context.Context, method string, req, reply proto.Message, key string, o callOptions, grpcOpts ...grpc.CallOption) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "idempotency-key", key)
	}
	return decodeError(invoke(ctx, c.conn, *o.policy, method, req, reply, grpcOpts...), key)
}
