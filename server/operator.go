package server

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/jobkey"
	"github.com/oncejob/oncejob/server/idempotency"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
)

// maxReasonLen bounds the free-text reason of operator requests.
const maxReasonLen = 500

// operatorMethods need an idempotency key; CancelJob takes one if sent.
var operatorMethods = []string{
	oncejobv1.JobService_ReplayJob_FullMethodName,
	oncejobv1.JobService_ResolveJob_FullMethodName,
	oncejobv1.JobService_ApproveJob_FullMethodName,
}

var stageFromProto = func() map[oncejobv1.JobStage]store.JobStage {
	m := make(map[oncejobv1.JobStage]store.JobStage, len(stageToProto))
	for k, v := range stageToProto {
		m[v] = k
	}
	return m
}()

// CancelJob asks a job to stop; see the proto for the contract.
//
// Idempotency contract: identity tenant + method + optional
// `idempotency-key` with the request fingerprint; window as SubmitJob's;
// a replay returns the job as it is now with `idempotent-replayed: true`.
// Cancelling a cancelled job returns it; another terminal job is
// FAILED_PRECONDITION.
func (s *jobService) CancelJob(ctx context.Context, req *oncejobv1.CancelJobRequest) (*oncejobv1.CancelJobResponse, error) {
	ops := s.cfg.Store
	t, _ := tenant.FromContext(ctx)
	idem, err := operatorIdempotency(ctx, map[string]any{"job_id": req.GetJobId(), "reason": req.GetReason()})
	if err != nil {
		return nil, err
	}
	res, err := ops.JobCancel(ctx, &store.JobCancelParams{Tenant: t, ID: req.GetJobId(), Message: req.GetReason(), Idempotency: idem, Actor: actor(ctx)})
	job, err := s.operatorResult(ctx, res, err, req.GetJobId())
	if err != nil {
		return nil, err
	}
	return &oncejobv1.CancelJobResponse{Job: job}, nil
}

// ReplayJob queues a failed or dead-lettered job again with a fresh budget.
//
// Idempotency contract: identity tenant + method + `idempotency-key`
// (required) with the request fingerprint; window as SubmitJob's; a replay
// of the key returns the job as it is now with `idempotent-replayed: true`
// and queues nothing again; another fingerprint is INVALID_ARGUMENT,
// IDEMPOTENCY_KEY_REUSED; a job in another status is FAILED_PRECONDITION.
func (s *jobService) ReplayJob(ctx context.Context, req *oncejobv1.ReplayJobRequest) (*oncejobv1.ReplayJobResponse, error) {
	ops := s.cfg.Store
	t, _ := tenant.FromContext(ctx)
	idem, err := operatorIdempotency(ctx, map[string]any{"job_id": req.GetJobId(), "from_stage": req.GetFromStage().String(), "reason": req.GetReason()})
	if err != nil {
		return nil, err
	}
	res, err := ops.JobReplay(ctx, &store.JobReplayParams{Tenant: t, ID: req.GetJobId(), FromStage: stageFromProto[req.GetFromStage()], Message: req.GetReason(), Idempotency: idem, Actor: actor(ctx)})
	job, err := s.operatorResult(ctx, res, err, req.GetJobId())
	if err != nil {
		return nil, err
	}
	return &oncejobv1.ReplayJobResponse{Job: job}, nil
}

// ResolveJob settles an OUTCOME_UNKNOWN job by hand.
//
// Idempotency contract: as ReplayJob's; a job not OUTCOME_UNKNOWN is
// FAILED_PRECONDITION.
func (s *jobService) ResolveJob(ctx context.Context, req *oncejobv1.ResolveJobRequest) (*oncejobv1.ResolveJobResponse, error) {
	ops := s.cfg.Store
	t, _ := tenant.FromContext(ctx)
	idem, err := operatorIdempotency(ctx, map[string]any{"job_id": req.GetJobId(), "resolution": req.GetResolution().String(), "reason": req.GetReason()})
	if err != nil {
		return nil, err
	}
	params := &store.JobResolveParams{Tenant: t, ID: req.GetJobId(), To: store.JobStatusQueued, Message: req.GetReason(), Idempotency: idem, Actor: actor(ctx)}
	if req.GetResolution() == oncejobv1.Resolution_RESOLUTION_FAIL {
		params.To = store.JobStatusFailed
		params.Error = &store.JobError{Code: "RESOLVED_FAILED", Message: "failed by ResolveJob: " + req.GetReason()}
	}
	res, err := ops.JobResolve(ctx, params)
	job, err := s.operatorResult(ctx, res, err, req.GetJobId())
	if err != nil {
		return nil, err
	}
	return &oncejobv1.ResolveJobResponse{Job: job}, nil
}

// ApproveJob approves or rejects a job AWAITING_APPROVAL.
//
// Idempotency contract: as ReplayJob's; a job not AWAITING_APPROVAL is
// FAILED_PRECONDITION.
func (s *jobService) ApproveJob(ctx context.Context, req *oncejobv1.ApproveJobRequest) (*oncejobv1.ApproveJobResponse, error) {
	ops := s.cfg.Store
	t, _ := tenant.FromContext(ctx)
	idem, err := operatorIdempotency(ctx, map[string]any{"job_id": req.GetJobId(), "approve": req.GetApprove(), "reason": req.GetReason()})
	if err != nil {
		return nil, err
	}
	res, err := ops.JobApprove(ctx, &store.JobApproveParams{Tenant: t, ID: req.GetJobId(), Approve: req.GetApprove(), Message: req.GetReason(), Idempotency: idem, Actor: actor(ctx)})
	job, err := s.operatorResult(ctx, res, err, req.GetJobId())
	if err != nil {
		return nil, err
	}
	return &oncejobv1.ApproveJobResponse{Job: job}, nil
}

// operatorIdempotency binds the call to the client's key, if it sent one.
func operatorIdempotency(ctx context.Context, request map[string]any) (*store.IdempotencyParams, error) {
	key, ok := idempotency.FromContext(ctx)
	if !ok {
		return nil, nil
	}
	fp, err := jobkey.RequestFingerprint(request)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "fingerprint: %v", err)
	}
	return &store.IdempotencyParams{Method: key.Method, Key: key.Value, Fingerprint: fp}, nil
}

func (s *jobService) operatorResult(ctx context.Context, res *store.OperatorResult, err error, jobID string) (*oncejobv1.Job, error) {
	var refused *store.TransitionRefusedError
	if errors.As(err, &refused) {
		return nil, transitionRefused(jobID, refused.Status)
	}
	if err != nil {
		return nil, s.storeError(ctx, err, "job "+jobID)
	}
	if res.Replayed {
		idempotency.MarkReplayed(ctx)
	}
	return jobToProto(res.Job), nil
}

// transitionRefused is FAILED_PRECONDITION naming the job's status.
func transitionRefused(jobID string, jobStatus store.JobStatus) error {
	current := statusToProto[jobStatus].String()
	st, _ := status.Newf(codes.FailedPrecondition, "job %s is %s: this request does not apply to it", jobID, current).WithDetails(
		&errdetails.ErrorInfo{Reason: "JOB_STATUS_CONFLICT", Domain: errorDomain, Metadata: map[string]string{"job_id": jobID, "status": current}},
		&errdetails.PreconditionFailure{Violations: []*errdetails.PreconditionFailure_Violation{{Type: "STATUS", Subject: "jobs/" + jobID, Description: "the job is " + current}}},
	)
	return st.Err()
}
