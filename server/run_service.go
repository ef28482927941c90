package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/jobkey"
	"github.com/oncejob/oncejob/jobspec"
	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/server/idempotency"
	"github.com/oncejob/oncejob/server/pagetoken"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/watch"
)

// runRateWindow is how far back a run's rate looks.
const runRateWindow = time.Minute

// runMethods need an idempotency key.
var runMethods = []string{
	oncejobv1.RunService_CreateRun_FullMethodName,
	oncejobv1.RunService_RetryRunFailures_FullMethodName,
}

// runService implements oncejobv1.RunServiceServer on a store.RunStore.
// Items join runs through JobService.SubmitJobs (submit_jobs.go).
type runService struct {
	oncejobv1.UnimplementedRunServiceServer
	jobs  *jobService
	store store.RunStore
	now   func() time.Time
}

// CreateRun creates a run, or returns the one its key created.
//
// Idempotency contract:
//   - Identity: tenant + method + `idempotency-key` metadata (required),
//     with the fingerprint of name, pipeline, model profile, params,
//     labels and provider_batch.
//   - Window: the run's life; runs are not deleted, and the key sweeper
//     never frees a run's key (it lives on the run's row).
//   - Response: a replay returns the run as it is now with
//     `idempotent-replayed: true`; another fingerprint is INVALID_ARGUMENT,
//     IDEMPOTENCY_KEY_REUSED.
func (s *runService) CreateRun(ctx context.Context, req *oncejobv1.CreateRunRequest) (*oncejobv1.CreateRunResponse, error) {
	key, ok := idempotency.FromContext(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "idempotency key missing after interceptor")
	}
	params := req.GetParams().AsMap()
	canonicalParams, err := jobkey.Canonical(params)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "params: %v", err)
	}
	if req.GetProviderBatch() && !s.jobs.cfg.ProviderBatches {
		return nil, errProviderBatchUnsupported()
	}
	request := map[string]any{
		"name": req.GetName(), "pipeline": req.GetPipeline(), "model_profile": req.GetModelProfile(),
		"params": params, "labels": stringMap(req.GetLabels()),
	}
	if req.GetProviderBatch() { // absent when false: the keys of older runs keep their fingerprint
		request["provider_batch"] = true
	}
	fp, err := jobkey.RequestFingerprint(request)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "request: %v", err)
	}
	res, err := s.store.RunCreate(ctx, &store.RunCreateParams{
		ID: newID(), Tenant: key.Tenant, IdempotencyKey: key.Value, Fingerprint: fp,
		Name: req.GetName(), Pipeline: req.GetPipeline(), ModelProfile: req.GetModelProfile(),
		Params: canonicalParams, Labels: req.GetLabels(), ProviderBatch: req.GetProviderBatch(),
		RecentSince: s.now().Add(-runRateWindow),
	})
	if err != nil {
		return nil, s.jobs.storeError(ctx, err, "run")
	}
	if res.Existing {
		idempotency.MarkReplayed(ctx)
	}
	return &oncejobv1.CreateRunResponse{Run: s.runToProto(res.Run)}, nil
}

// GetRun returns a run with its progress. Read-only.
func (s *runService) GetRun(ctx context.Context, req *oncejobv1.GetRunRequest) (*oncejobv1.GetRunResponse, error) {
	run, err := s.get(ctx, req.GetRunId())
	if err != nil {
		return nil, err
	}
	return &oncejobv1.GetRunResponse{Run: s.runToProto(run)}, nil
}

// ListRunBatches returns the provider batches the run's calls went into,
// oldest first. Read-only.
func (s *runService) ListRunBatches(ctx context.Context, req *oncejobv1.ListRunBatchesRequest) (*oncejobv1.ListRunBatchesResponse, error) {
	t, _ := tenant.FromContext(ctx)
	run, err := s.store.RunGet(ctx, &store.RunGetParams{Tenant: t, ID: req.GetRunId(), WithoutProgress: true})
	if err != nil {
		return nil, s.jobs.storeError(ctx, err, "run "+req.GetRunId())
	}
	list, err := s.jobs.cfg.Store.RunBatchList(ctx, &store.RunBatchListParams{Tenant: t, RunID: run.ID})
	if err != nil {
		return nil, s.jobs.storeError(ctx, err, "run "+req.GetRunId())
	}
	resp := &oncejobv1.ListRunBatchesResponse{Batches: make([]*oncejobv1.RunBatch, len(list))}
	for i, b := range list {
		out := &oncejobv1.RunBatch{
			BatchId: b.BatchID, Status: b.Status, Lines: b.Lines, AnsweredLines: b.AnsweredLines, BilledLines: b.BilledLines,
			PriceClass: string(store.PriceClassBatch), CostMicros: b.CostMicros,
			CreateTime: timestamppb.New(b.CreatedAt), UpdateTime: timestamppb.New(b.UpdatedAt),
		}
		if b.ExpiresAt != nil {
			out.ExpireTime = timestamppb.New(*b.ExpiresAt)
		}
		resp.Batches[i] = out
	}
	return resp, nil
}

// ListRuns returns one page of the caller's runs, newest first. Read-only.
func (s *runService) ListRuns(ctx context.Context, req *oncejobv1.ListRunsRequest) (*oncejobv1.ListRunsResponse, error) {
	t, _ := tenant.FromContext(ctx)
	params := &store.RunListParams{Tenant: t, Limit: int(req.GetPageSize()), RecentSince: s.now().Add(-runRateWindow)}
	if req.GetPageToken() != "" {
		after, err := decodePageToken(s.jobs.tokens, pagetoken.Runs, t, req.GetPageToken(), nil)
		if err != nil {
			return nil, pageTokenError(err)
		}
		params.After = after
	}
	res, err := s.store.RunList(ctx, params)
	if err != nil {
		return nil, s.jobs.storeError(ctx, err, "runs")
	}
	resp := &oncejobv1.ListRunsResponse{}
	for _, r := range res.Runs {
		resp.Runs = append(resp.Runs, s.runToProto(r))
	}
	if res.Next != nil {
		resp.NextPageToken = encodePageToken(s.jobs.tokens, pagetoken.Runs, t, res.Next, nil)
	}
	return resp, nil
}

// WatchRun streams a run's progress, a snapshot per change, until every
// item is terminal. The watches of one run in this process share one
// reader (watch.Hub.WatchShared), which re-reads the run's progress when a
// job of the tenant changes, at most four times a second, so N watches of
// a run cost one read, not N. Read-only.
func (s *runService) WatchRun(req *oncejobv1.WatchRunRequest, stream grpc.ServerStreamingServer[oncejobv1.WatchRunResponse]) error {
	hub := s.jobs.cfg.Watch
	if hub == nil {
		return errWatchUnavailable
	}
	ctx := stream.Context()
	t, _ := tenant.FromContext(ctx)
	id := req.GetRunId()
	last := req.GetAfterSeq()
	var sendErr error
	err := hub.WatchShared(ctx, &watch.SharedParams{Tenant: t, Key: "run:" + id}, func(ctx context.Context) (any, bool, error) {
		run, err := s.store.RunGet(ctx, &store.RunGetParams{Tenant: t, ID: id, RecentSince: s.now().Add(-runRateWindow)})
		if err != nil {
			return nil, false, err
		}
		return run, run.Progress.Complete(), nil
	}, func(v any) (bool, error) {
		run := v.(*store.Run)
		if p := run.Progress; p.Seq > last {
			if sendErr = stream.Send(&oncejobv1.WatchRunResponse{Run: s.runToProto(run)}); sendErr != nil {
				return false, sendErr
			}
			last = p.Seq
		}
		return run.Progress.Complete(), nil
	})
	switch {
	case err == nil:
		return nil
	case sendErr != nil:
		return sendErr
	case errors.Is(err, watch.ErrShuttingDown):
		return shuttingDown("after_seq", fmt.Sprint(last))
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return s.jobs.storeError(ctx, err, "run "+id)
}

// RetryRunFailures replays every failed and dead-lettered job of a run.
//
// Idempotency contract:
//   - Identity: tenant + method + `idempotency-key` metadata (required),
//     with the fingerprint of the run id (the reason is not part of it).
//   - Window: the run's life (the key lives in run_operations).
//   - Response: a replay of the key answers the first call's count with
//     `idempotent-replayed: true` and replays nothing; the same key for
//     another run is INVALID_ARGUMENT, IDEMPOTENCY_KEY_REUSED.
func (s *runService) RetryRunFailures(ctx context.Context, req *oncejobv1.RetryRunFailuresRequest) (*oncejobv1.RetryRunFailuresResponse, error) {
	key, ok := idempotency.FromContext(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "idempotency key missing after interceptor")
	}
	fp, err := jobkey.RequestFingerprint(map[string]any{"run_id": req.GetRunId()})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "fingerprint: %v", err)
	}
	res, err := s.store.RunRetryFailures(ctx, &store.RunRetryFailuresParams{
		Tenant: key.Tenant, RunID: req.GetRunId(), Message: store.RunRetryMessage(req.GetReason()),
		Idempotency: store.IdempotencyParams{Method: key.Method, Key: key.Value, Fingerprint: fp},
		Actor:       actor(ctx),
	})
	if err != nil {
		return nil, s.jobs.storeError(ctx, err, "run "+req.GetRunId())
	}
	if res.Replayed {
		idempotency.MarkReplayed(ctx)
	}
	run, err := s.get(ctx, req.GetRunId())
	if err != nil {
		return nil, err
	}
	return &oncejobv1.RetryRunFailuresResponse{Replayed: int32(res.Count), Run: s.runToProto(run)}, nil
}

// CancelRun cancels a run and the jobs it created that are not terminal.
//
// Idempotency contract:
//   - Identity: tenant + run id; no key is needed, the state decides.
//   - Window: none.
//   - Response: a cancelled run is returned as it is; it accepts no items,
//     so a repeat has nothing new to cancel.
func (s *runService) CancelRun(ctx context.Context, req *oncejobv1.CancelRunRequest) (*oncejobv1.CancelRunResponse, error) {
	t, _ := tenant.FromContext(ctx)
	res, err := s.store.RunCancel(ctx, &store.RunCancelParams{Tenant: t, RunID: req.GetRunId(), Message: store.RunCancelMessage(req.GetReason()), Actor: actor(ctx)})
	if err != nil {
		return nil, s.jobs.storeError(ctx, err, "run "+req.GetRunId())
	}
	run, err := s.get(ctx, req.GetRunId())
	if err != nil {
		return nil, err
	}
	return &oncejobv1.CancelRunResponse{Cancelled: int32(res.Count), Run: s.runToProto(run)}, nil
}

func (s *runService) get(ctx context.Context, id string) (*store.Run, error) {
	t, _ := tenant.FromContext(ctx)
	run, err := s.store.RunGet(ctx, &store.RunGetParams{Tenant: t, ID: id, RecentSince: s.now().Add(-runRateWindow)})
	if err != nil {
		return nil, s.jobs.storeError(ctx, err, "run "+id)
	}
	return run, nil
}

// runToProto is the run with its rate and the time left estimated now.
func (s *runService) runToProto(r *store.Run) *oncejobv1.Run {
	p := r.Progress
	out := &oncejobv1.Run{
		Id: r.ID, IdempotencyKey: r.IdempotencyKey, Name: r.Name, Pipeline: r.Pipeline,
		ModelProfile: r.ModelProfile, Labels: r.Labels, State: oncejobv1.RunState_RUN_STATE_OPEN,
		ProviderBatch: r.ProviderBatch, CreateTime: timestamppb.New(r.CreatedAt),
		Progress: &oncejobv1.RunProgress{
			Seq: p.Seq, Items: p.Items, Reused: p.Reused, Computed: p.Items - p.Reused,
			Queued:           p.ByStatus[store.JobStatusQueued],
			Running:          p.ByStatus[store.JobStatusRunning],
			RetryWait:        p.ByStatus[store.JobStatusRetryWait],
			AwaitingApproval: p.ByStatus[store.JobStatusAwaitingApproval],
			OutcomeUnknown:   p.ByStatus[store.JobStatusOutcomeUnknown],
			Succeeded:        p.ByStatus[store.JobStatusSucceeded],
			Failed:           p.ByStatus[store.JobStatusFailed],
			Cancelled:        p.ByStatus[store.JobStatusCancelled],
			DeadLettered:     p.ByStatus[store.JobStatusDeadLettered],
			Usage: &oncejobv1.JobUsage{PromptTokens: p.Usage.PromptTokens, CompletionTokens: p.Usage.CompletionTokens,
				CostMicros: p.Usage.CostMicros, LlmCalls: p.Usage.LLMCalls},
			Complete: p.Complete(),
		},
	}
	if len(r.Params) > 0 {
		var m map[string]any
		if json.Unmarshal(r.Params, &m) == nil {
			out.Params, _ = structpb.NewStruct(m)
		}
	}
	switch {
	case r.CancelledAt != nil:
		out.State, out.CancelTime = oncejobv1.RunState_RUN_STATE_CANCELLED, timestamppb.New(*r.CancelledAt)
	case p.Complete():
		// Done: no rate decaying for a minute after the last item ended,
		// no time left (issue 30).
		out.State = oncejobv1.RunState_RUN_STATE_COMPLETED
		return out
	}
	window := min(runRateWindow, s.now().Sub(r.CreatedAt))
	if window > 0 {
		out.Progress.ItemsPerSecond = float64(p.FinishedRecently) / window.Seconds()
	}
	left := p.Items - p.Terminal()
	var estimate time.Duration
	if left > 0 && out.Progress.ItemsPerSecond > 0 {
		estimate = time.Duration(float64(left) / out.Progress.ItemsPerSecond * float64(time.Second))
	}
	if r.ProviderBatch && left > 0 {
		// The items wait for batches: no rate until one answered, and none
		// takes longer than the window.
		out.Progress.ProviderBatchWindow = durationpb.New(llm.BatchWindow)
		if estimate == 0 || estimate > llm.BatchWindow {
			estimate = llm.BatchWindow
		}
	}
	if estimate > 0 {
		out.Progress.EstimatedTimeLeft = durationpb.New(estimate)
	}
	if !r.ProviderBatch {
		s.limitProgress(r, out.Progress, left)
	}
	return out
}

// limitProgress sets the provider limit the run's calls draw from, its use,
// and the time the run's items left need at its pace: their calls (as many
// per item as its finished items made, 1 before any) over its requests per
// second, or their tokens (as many per call as its calls used) over its
// tokens per second, whichever is longer.
func (s *runService) limitProgress(r *store.Run, p *oncejobv1.RunProgress, left int64) {
	pipes := s.jobs.cfg.Pipelines
	profile := r.ModelProfile
	if pl, ok := pipes.Get(r.Pipeline); ok && profile == "" {
		profile = pl.DefaultModelProfile()
	}
	if profile == "" {
		return
	}
	name := pipes.LimitOf(profile)
	configured := pipes.ProviderLimits()[name].Limits
	var use *oncejobv1.ProviderLimitUse
	if f := s.jobs.cfg.ProviderLimitUse; f != nil {
		use = f(name)
	}
	if use == nil {
		use = &oncejobv1.ProviderLimitUse{
			RequestsPerMinute: configured.RequestsPerMinute, TokensPerMinute: configured.TokensPerMinute,
			CallsInFlightLimit: int32(configured.CallsInFlight),
		}
	}
	use.Name = name
	use.ConfiguredRequestsPerMinute, use.ConfiguredTokensPerMinute = configured.RequestsPerMinute, configured.TokensPerMinute
	p.Limit = use
	if left <= 0 {
		return
	}
	u := p.GetUsage()
	callsPerItem := 1.0
	if done := p.Succeeded + p.Failed + p.DeadLettered - p.Reused; done > 0 && u.GetLlmCalls() > 0 {
		callsPerItem = max(float64(u.GetLlmCalls())/float64(done), 1)
	}
	calls := float64(left) * callsPerItem
	var seconds float64
	if rpm := use.GetRequestsPerMinute(); rpm > 0 {
		seconds = calls / (rpm / 60)
	}
	if tpm := use.GetTokensPerMinute(); tpm > 0 && u.GetLlmCalls() > 0 {
		perCall := float64(u.GetPromptTokens()+u.GetCompletionTokens()) / float64(u.GetLlmCalls())
		seconds = max(seconds, calls*perCall/(tpm/60))
	}
	if seconds > 0 {
		p.LimitTimeLeft = durationpb.New(time.Duration(seconds * float64(time.Second)))
	}
}

// errProviderBatchUnsupported refuses a provider_batch run on a server
// whose provider has no batch API.
func errProviderBatchUnsupported() error {
	const msg = "provider_batch: the server's LLM provider has no batch API (OpenAI's Files and Batches endpoints; vLLM, llama.cpp and Ollama have none): start serve with --llm-batch-api on a provider that has one, or submit the run without provider_batch"
	st, _ := status.New(codes.InvalidArgument, msg).WithDetails(
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "provider_batch", Description: "the server's LLM provider has no batch API"}}},
		&errdetails.ErrorInfo{Reason: "PROVIDER_BATCH_UNSUPPORTED", Domain: errorDomain})
	return st.Err()
}

// submitRun is the open run items of SubmitJobs join: NOT_FOUND, or
// FAILED_PRECONDITION (RUN_CANCELLED) for a cancelled run.
func (s *jobService) submitRun(ctx context.Context, t, id string) (*store.Run, error) {
	run, err := s.cfg.Store.RunGet(ctx, &store.RunGetParams{Tenant: t, ID: id, WithoutProgress: true})
	if err != nil {
		return nil, s.storeError(ctx, err, "run "+id)
	}
	if run.CancelledAt != nil {
		st, _ := status.Newf(codes.FailedPrecondition, "run %s is cancelled: it accepts no items", id).WithDetails(
			&errdetails.ErrorInfo{Reason: "RUN_CANCELLED", Domain: errorDomain, Metadata: map[string]string{"run_id": id}})
		return nil, st.Err()
	}
	return run, nil
}

// answerFromRun answers the submissions whose key is already an item of
// run from the run's own record (EXISTING, already_in_run; or
// IDEMPOTENCY_KEY_REUSED for another request), however old the key, and
// returns the others.
func (s *jobService) answerFromRun(ctx context.Context, run *store.Run, params []*store.JobSubmitParams, at []int, results []*oncejobv1.SubmitJobsResult) ([]*store.JobSubmitParams, []int, error) {
	if len(params) == 0 {
		return params, at, nil
	}
	keys := make([]string, len(params))
	for j, p := range params {
		keys[j] = p.IdempotencyKey
	}
	found, err := s.cfg.Store.RunItemGetMany(ctx, &store.RunItemGetManyParams{Tenant: run.Tenant, RunID: run.ID, Keys: keys})
	if err != nil {
		return nil, nil, s.storeError(ctx, err, "run "+run.ID)
	}
	if len(found) == 0 {
		return params, at, nil
	}
	byKey := make(map[string]*store.RunItem, len(found))
	for _, it := range found {
		byKey[it.Key] = it
	}
	var restParams []*store.JobSubmitParams
	var restAt []int
	for j, p := range params {
		it, ok := byKey[p.IdempotencyKey]
		switch {
		case !ok:
			restParams, restAt = append(restParams, p), append(restAt, at[j])
		case it.Fingerprint != p.Fingerprint:
			results[at[j]] = &oncejobv1.SubmitJobsResult{Error: idempotency.ReusedStatus("field", fmt.Sprintf("items[%d].idempotency_key", at[j])).Proto()}
		default:
			it.Job.Params, it.Job.Labels = nil, nil // see SubmitJobsResult.job
			results[at[j]] = &oncejobv1.SubmitJobsResult{Job: jobToProto(it.Job), Outcome: oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING, AlreadyInRun: true}
		}
	}
	return restParams, restAt, nil
}

// validateRunRequest checks RunService's requests.
func (s *jobService) validateRunRequest(req any, v *violations) {
	switch r := req.(type) {
	case *oncejobv1.CreateRunRequest:
		if n := utf8.RuneCountInString(r.GetName()); n == 0 || n > maxNameLen || !utf8.ValidString(r.GetName()) {
			v.add("name", "is required: valid UTF-8 of 1-%d characters", maxNameLen)
		}
		if r.GetPipeline() != "" {
			p, ok := s.cfg.Pipelines.Get(r.GetPipeline())
			if !ok {
				v.add("pipeline", "unknown pipeline %q; known pipelines: %v", r.GetPipeline(), s.cfg.Pipelines.Names())
			} else if r.GetModelProfile() != "" && !p.AllowsModelProfile(r.GetModelProfile()) {
				v.add("model_profile", "pipeline %q allows %v", p.Name, p.ModelProfiles)
			}
		}
		v.addSpec(jobspec.CheckParams(r.GetParams()))
		v.addSpec(jobspec.CheckLabels(r.GetLabels()))
	case *oncejobv1.GetRunRequest:
		validateID(&r.RunId, "run_id", v)
	case *oncejobv1.ListRunBatchesRequest:
		validateID(&r.RunId, "run_id", v)
	case *oncejobv1.WatchRunRequest:
		validateID(&r.RunId, "run_id", v)
		if r.GetAfterSeq() < 0 {
			v.add("after_seq", "must not be negative")
		}
	case *oncejobv1.RetryRunFailuresRequest:
		validateID(&r.RunId, "run_id", v)
		validateReason(r.GetReason(), v)
	case *oncejobv1.CancelRunRequest:
		validateID(&r.RunId, "run_id", v)
		validateReason(r.GetReason(), v)
	case *oncejobv1.ListRunsRequest:
		if r.GetPageSize() < 0 || r.GetPageSize() > 100 {
			v.add("page_size", "must be between 0 and 100")
		}
	}
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
