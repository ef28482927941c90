package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/jobspec"
	"github.com/oncejob/oncejob/server/idempotency"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
)

// maxSubmitJobsItems bounds one SubmitJobs call.
const maxSubmitJobsItems = 1000

// SubmitJobs submits many jobs in one call, each item answered on its own.
//
// Idempotency contract, per item:
//   - Identity: tenant + SubmitJob's method + the item's idempotency_key
//     (required, 1-255 printable ASCII), with SubmitJob's fingerprint of
//     the item's request. So an item and a SubmitJob call with the same key
//     are one intent, and so are two items of one call with one key (the
//     store answers the second as a replay of the first). The call's own
//     `idempotency-key` metadata is not required and not used: a retried
//     call is idempotent item by item.
//   - Window: as SubmitJob's.
//   - Response: per item, what SubmitJob would answer: the job with outcome
//     CREATED, DEDUPLICATED or EXISTING, or an error: INVALID_ARGUMENT with
//     BadRequest field violations (`items[i]....`) for an invalid item,
//     INVALID_ARGUMENT with ErrorInfo IDEMPOTENCY_KEY_REUSED (metadata
//     `field: items[i].idempotency_key`) for a key bound to another
//     request, UNAVAILABLE when the store failed that item alone.
//
// The item count is checked by the validation interceptor, so a call with
// none or over the limit writes nothing. Invalid items are answered here
// and never reach the store; the valid ones are one JobSubmitMany call (a
// handful of statements, whatever their number), so one bad item never
// fails another.
func (s *jobService) SubmitJobs(ctx context.Context, req *oncejobv1.SubmitJobsRequest) (*oncejobv1.SubmitJobsResponse, error) {
	t, _ := tenant.FromContext(ctx)
	var (
		run         *store.Run
		runDefaults *structpb.Struct
	)
	if req.GetRunId() != "" {
		var err error
		if run, err = s.submitRun(ctx, t, req.GetRunId()); err != nil {
			return nil, err
		}
		runDefaults = jobspec.RunParams(run)
		release, err := s.holdRunCopies(run, len(req.GetItems()))
		if err != nil {
			return nil, err
		}
		defer release()
	}
	items := req.GetItems()
	results := make([]*oncejobv1.SubmitJobsResult, len(items))
	var (
		params []*store.JobSubmitParams
		at     []int // at[j]: the item of params[j]
	)
	for i, item := range items {
		var (
			p  *store.JobSubmitParams
			st *status.Status
		)
		if run != nil {
			p, st = s.submitRunItem(ctx, t, run, runDefaults, i, item)
		} else {
			p, st = s.submitJobsItem(ctx, t, i, item)
		}
		if st != nil {
			results[i] = &oncejobv1.SubmitJobsResult{Error: st.Proto()}
			continue
		}
		params = append(params, p)
		at = append(at, i)
	}
	if run != nil {
		var err error
		if params, at, err = s.answerFromRun(ctx, run, params, at, results); err != nil {
			return nil, err
		}
	}
	if len(params) > 0 {
		res, err := s.cfg.Store.JobSubmitMany(ctx, &store.JobSubmitManyParams{Jobs: params})
		if err != nil {
			return nil, s.storeError(ctx, err, "jobs")
		}
		for j, item := range res.Items {
			results[at[j]] = s.submitJobsResult(ctx, at[j], item)
		}
	}
	if run != nil {
		for _, r := range results {
			withoutRunCopies(r.GetJob())
		}
	}
	return &oncejobv1.SubmitJobsResponse{Results: results}, nil
}

// maxRunCopyBytes bounds what a run's params and labels, merged into each
// item of one SubmitJobs call, may add up to (issue #31: a 21 KB call made
// 1,000 jobs of 261 KB each). The jobs' rows no longer hold the run's (they
// are stored once, on the run's row: submitRunItem), but each item is still
// validated and keyed over the merged params: about 10 ms of CPU an item
// at the largest params (256 KiB), so a call of 1,000 such items from a
// 22 KB request would cost 10 s. The bound keeps a call's work near that
// of a request of its size (docs/operations.md, "Memory").
const maxRunCopyBytes = 8 << 20

// runCopyHeld is how many times a copy of the run's params an item makes
// is drawn from the budget while a call is answered: the merged params'
// map, their canonical JSON, the fingerprint's and the dedup key's, each
// item's garbage until the collector takes it.
const runCopyHeld = 8

// holdRunCopies refuses a call whose items would merge more than
// maxRunCopyBytes of the run's params and labels (INVALID_ARGUMENT: split
// it), and draws what the merges make (each about runCopyHeld times) from
// the memory budget, before anything is written: a refusal there is
// retryable and nothing was committed.
func (s *jobService) holdRunCopies(run *store.Run, items int) (release func(), err error) {
	perItem := int64(len(run.Params))
	for k, v := range run.Labels {
		perItem += int64(len(k) + len(v))
	}
	total := perItem * int64(items)
	if total > maxRunCopyBytes {
		fit := max(1, maxRunCopyBytes/perItem)
		var v violations
		v.add("items", "holds %d items; the run's params and labels (%d bytes) copied into each would be %d bytes, more than %d: submit at most %d items per call to this run",
			items, perItem, total, maxRunCopyBytes, fit)
		return nil, v.err()
	}
	hold := s.cfg.Memory.Hold("a run's items")
	if err := hold.Grow(runCopyHeld * total); err != nil {
		return nil, err
	}
	return hold.Release, nil
}

// withoutRunCopies drops what a run item's job has from its run from a
// SubmitJobs result (see SubmitJobsResult.job).
func withoutRunCopies(j *oncejobv1.Job) {
	if j != nil {
		j.Params, j.Labels = nil, nil
	}
}

// submitRunItem is submitJobsItem for item i of a call into run, whose
// params (decoded once per call: runDefaults) and labels it is validated
// and keyed with, under its own: the limits hold for the merged ones, and
// the dedup key and fingerprint are those of the merged request. The job's
// row keeps only the item's own params and labels, with the run's id: a
// run's are stored once, on its row, and every read of the job puts them
// under the item's (docs/architecture.md, "Runs").
func (s *jobService) submitRunItem(ctx context.Context, tenant string, run *store.Run, runDefaults *structpb.Struct, i int, item *oncejobv1.SubmitJobsItem) (*store.JobSubmitParams, *status.Status) {
	req := item.GetRequest()
	ownParams, ownLabels := req.GetParams(), req.GetLabels()
	jobspec.WithRunDefaults(req, run, runDefaults)
	if run.ProviderBatch && req != nil {
		jobspec.WithBatchTwin(req, s.cfg.Pipelines)
	}
	p, st := s.submitJobsItem(ctx, tenant, i, item)
	if st != nil {
		return nil, st
	}
	own, err := jobspec.CanonicalParams(ownParams)
	if err != nil { // the merged params had one: not reached
		return nil, status.Convert(specError(err))
	}
	p.Params, p.Labels, p.RunID = own, ownLabels, run.ID
	return p, nil
}

// submitJobsItem validates item i and makes its store params, or returns
// its error.
func (s *jobService) submitJobsItem(ctx context.Context, tenant string, i int, item *oncejobv1.SubmitJobsItem) (*store.JobSubmitParams, *status.Status) {
	var v, request violations
	if msg := idempotency.Check(item.GetIdempotencyKey()); msg != "" {
		v.add("idempotency_key", "%s", msg)
	}
	if item.GetRequest() == nil {
		v.add("request", "is required")
	} else {
		validateText(item.GetRequest(), &request)
		s.validateSubmit(item.GetRequest(), &request)
	}
	if len(v)+len(request) > 0 { // the paths are written for an invalid item only
		v = append(v.prefixed(fmt.Sprintf("items[%d].", i)), request.prefixed(fmt.Sprintf("items[%d].request.", i))...)
		return nil, status.Convert(v.err())
	}
	key := idempotency.Key{Tenant: tenant, Method: oncejobv1.JobService_SubmitJob_FullMethodName, Value: item.GetIdempotencyKey()}
	p, err := s.submitParams(ctx, key, item.GetRequest())
	if err != nil {
		return nil, status.Convert(err)
	}
	return p, nil
}

// submitJobsResult is the answer to item i from the store's.
func (s *jobService) submitJobsResult(ctx context.Context, i int, item store.JobSubmitItem) *oncejobv1.SubmitJobsResult {
	if errors.Is(item.Err, store.ErrIdempotencyKeyReused) {
		return &oncejobv1.SubmitJobsResult{Error: idempotency.ReusedStatus("field", fmt.Sprintf("items[%d].idempotency_key", i)).Proto()}
	}
	if item.Err != nil {
		return &oncejobv1.SubmitJobsResult{Error: status.Convert(s.storeError(ctx, item.Err, fmt.Sprintf("items[%d]", i))).Proto()}
	}
	return &oncejobv1.SubmitJobsResult{Job: jobToProto(item.Job), Outcome: outcomeToProto[item.Outcome]}
}

// validateSubmitJobs checks what makes the whole call invalid; each item is
// checked on its own by the handler.
func validateSubmitJobs(r *oncejobv1.SubmitJobsRequest, v *violations) {
	validateBatchSize(r, v)
	if r.GetRunId() != "" {
		validateID(&r.RunId, "run_id", v)
	}
}

func validateBatchSize(r *oncejobv1.SubmitJobsRequest, v *violations) {
	if n := len(r.GetItems()); n == 0 || n > maxSubmitJobsItems {
		v.add("items", "must hold 1 to %d items, not %d; split larger batches", maxSubmitJobsItems, n)
	}
}

// batchSizeInterceptor refuses a SubmitJobs call of no items or more than
// maxSubmitJobsItems before the tenant limits see it: such a call can
// never succeed, so it spends no rate token and gets no retry hint.
func batchSizeInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if r, ok := req.(*oncejobv1.SubmitJobsRequest); ok {
		var v violations
		validateBatchSize(r, &v)
		if err := v.err(); err != nil {
			return nil, err
		}
	}
	return handler(ctx, req)
}
