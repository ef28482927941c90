package server

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/jobspec"
	"github.com/oncejob/oncejob/server/groupcommit"
	"github.com/oncejob/oncejob/server/idempotency"
	"github.com/oncejob/oncejob/server/membudget"
	"github.com/oncejob/oncejob/server/pagetoken"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/telemetry"
)

type jobService struct {
	oncejobv1.UnimplementedJobServiceServer
	cfg     Config
	submits *groupcommit.Batcher
	tokens  *pagetoken.Signer // seals page tokens and watch cursors
	// jobBytes is each tenant's mean job size in its last ListJobs page
	// (tenant -> int64), so that a page of large jobs asks the store to
	// size about as many rows as its byte bound holds, not page_size:
	// sizing a row costs the store its read.
	jobBytes sync.Map
}

// SubmitJob creates a job, or returns the one its idempotency key created.
//
// Idempotency contract:
//   - Identity: tenant + method + `idempotency-key` metadata (required,
//     1-255 printable ASCII); the request fingerprint (jobkey.Fingerprint:
//     everything but labels) must match the first request's.
//   - Window: the key is remembered for the idempotency window (default
//     24h, --idempotency-window); then the janitor frees it, the job stays.
//   - Response: a replay returns the original job, outcome EXISTING, header
//     `idempotent-replayed: true`. Another fingerprint: INVALID_ARGUMENT,
//     ErrorInfo IDEMPOTENCY_KEY_REUSED. Missing or malformed key:
//     INVALID_ARGUMENT, ErrorInfo IDEMPOTENCY_KEY_INVALID.
//
// A request is fully validated (by the validation interceptor) before
// anything is written. The key is read first, so a replay is answered from
// a read and never waits for a write. A new key goes to the group commit
// (server/groupcommit): concurrent submissions are written together, and
// the store's insert-or-return decides each, so concurrent calls with one
// key create one job. See docs/architecture.md, "Submitting in batches".
func (s *jobService) SubmitJob(ctx context.Context, req *oncejobv1.SubmitJobRequest) (*oncejobv1.SubmitJobResponse, error) {
	key, ok := idempotency.FromContext(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "idempotency key missing after interceptor")
	}
	params, err := s.submitParams(ctx, key, req)
	if err != nil {
		return nil, err
	}
	res, err := s.cfg.Store.JobGetByIdempotencyKey(ctx, &store.JobGetByIdempotencyKeyParams{
		Tenant:         params.Tenant,
		Method:         params.Method,
		IdempotencyKey: params.IdempotencyKey,
		Fingerprint:    params.Fingerprint,
	})
	if errors.Is(err, store.ErrNotFound) {
		res, err = s.submits.Submit(ctx, params)
	}
	if err != nil {
		return nil, s.storeError(ctx, err, "job")
	}
	if res.Outcome == store.OutcomeExisting {
		idempotency.MarkReplayed(ctx)
	}
	return &oncejobv1.SubmitJobResponse{Job: jobToProto(res.Job), Outcome: outcomeToProto[res.Outcome]}, nil
}

// submitParams is what the store needs to submit req under key: see
// jobspec.Params, its errors mapped to INVALID_ARGUMENT (specError). The
// job keeps the trace context of the call (when it is traced), so the work
// it causes joins the caller's trace.
func (s *jobService) submitParams(ctx context.Context, key idempotency.Key, req *oncejobv1.SubmitJobRequest) (*store.JobSubmitParams, error) {
	p, err := jobspec.Params(s.cfg.Pipelines, jobspec.Key{Tenant: key.Tenant, Method: key.Method, Value: key.Value}, req)
	if err != nil {
		return nil, specError(err)
	}
	p.Traceparent = telemetry.Traceparent(ctx)
	return p, nil
}

// GetJob returns one job of the caller's tenant; another tenant's job is
// NOT_FOUND. JOB_VIEW_FULL adds its checkpoints and attempt journal, read
// only once the tenant-scoped read found the job.
func (s *jobService) GetJob(ctx context.Context, req *oncejobv1.GetJobRequest) (*oncejobv1.GetJobResponse, error) {
	t, _ := tenant.FromContext(ctx)
	j, err := s.cfg.Store.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: t, ID: req.GetJobId()})
	if err != nil {
		return nil, s.storeError(ctx, err, "job "+req.GetJobId())
	}
	pj := jobToProto(j)
	if req.GetView() == oncejobv1.JobView_JOB_VIEW_FULL {
		if err := s.addDetail(ctx, pj); err != nil {
			return nil, err
		}
	}
	return &oncejobv1.GetJobResponse{Job: pj}, nil
}

// ListJobs returns one page of the caller's jobs, newest first.
func (s *jobService) ListJobs(ctx context.Context, req *oncejobv1.ListJobsRequest) (*oncejobv1.ListJobsResponse, error) {
	t, _ := tenant.FromContext(ctx)
	limit := int(req.GetPageSize())
	if limit == 0 {
		limit = defaultPageSize
	}
	params := &store.JobListParams{Tenant: t, Pipeline: req.GetPipeline(), RunID: req.GetRunId(), Limit: limit}
	if mean, ok := s.jobBytes.Load(t); ok {
		params.Limit = int(min(int64(limit), max(1, 2*params.PageBytes()/mean.(int64))))
	}
	if req.GetStatus() != oncejobv1.JobStatus_JOB_STATUS_UNSPECIFIED {
		params.Status = statusFromProto[req.GetStatus()]
	}
	if req.GetPageToken() != "" {
		after, err := decodePageToken(s.tokens, pagetoken.Jobs, t, req.GetPageToken(), req)
		if err != nil {
			return nil, pageTokenError(err)
		}
		params.After = after
	}
	// The head is read before the page: a change the page misses comes
	// after it.
	c, err := s.cfg.Store.JobChangeHead(ctx, &store.JobChangeHeadParams{})
	if err != nil {
		return nil, s.storeError(ctx, err, "jobs")
	}
	head := encodeWatchCursor(s.tokens, t, c)
	// The page is bounded in bytes (store.JobListBytesDefault), and the
	// budget holds its read: the bound and the jobs a read may return past
	// it, then the page's own size until the response is built.
	hold := s.cfg.Memory.Hold("a page of jobs")
	defer hold.Release()
	if err := hold.Grow(params.PageBytes() + pageReadSlack); err != nil {
		return nil, err
	}
	res, err := s.cfg.Store.JobList(ctx, params)
	if err != nil {
		return nil, s.storeError(ctx, err, "jobs")
	}
	hold.Shrink(hold.Bytes() - res.Bytes)
	if len(res.Jobs) > 0 {
		s.jobBytes.Store(t, max(1, res.Bytes/int64(len(res.Jobs))))
	}
	resp := &oncejobv1.ListJobsResponse{Jobs: make([]*oncejobv1.Job, len(res.Jobs)), WatchCursor: head}
	for i, j := range res.Jobs {
		resp.Jobs[i] = jobToProto(j)
	}
	if req.GetView() == oncejobv1.JobView_JOB_VIEW_FULL {
		if err := s.addPageDetail(ctx, resp, res, hold); err != nil {
			return nil, err
		}
	}
	if res.Next != nil {
		resp.NextPageToken = encodePageToken(s.tokens, pagetoken.Jobs, t, res.Next, req)
	}
	return resp, nil
}

// fullJobViewBytes bounds the checkpoints and attempts a JOB_VIEW_FULL page
// holds past its first job.
const fullJobViewBytes = 1 << 20

// addPageDetail fills the FULL view of a page's jobs one at a time, each
// drawn from the memory budget, and ends the page after the job that
// takes the detail past fullJobViewBytes (res.Next then points after it).
func (s *jobService) addPageDetail(ctx context.Context, resp *oncejobv1.ListJobsResponse, res *store.JobListResult, hold *membudget.Hold) error {
	var total int64
	for i, pj := range resp.Jobs {
		if err := s.addDetail(ctx, pj); err != nil {
			return err
		}
		n := int64(proto.Size(&oncejobv1.Job{Checkpoints: pj.GetCheckpoints(), LlmAttempts: pj.GetLlmAttempts()}))
		if err := hold.Grow(n); err != nil {
			return err
		}
		if total += n; total > fullJobViewBytes && i < len(resp.Jobs)-1 {
			resp.Jobs = resp.Jobs[:i+1]
			last := res.Jobs[i]
			res.Next = &store.JobCursor{CreatedAt: last.CreatedAt, ID: last.ID}
			return nil
		}
	}
	return nil
}

// pageReadSlack is what a bounded read may return past its byte bound:
// the rows that tell whether a next page exists, two jobs of at most
// about 300 KiB (params, labels and an error).
const pageReadSlack = 1 << 20

// newID is a new resource id: a UUIDv7, so ids sort by creation.
func newID() string { return jobspec.NewID() }
