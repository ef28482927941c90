package server

import (
	"context"
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/grpc"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/jobspec"
)

// validationInterceptor rejects a request that breaks the field rules of the
// proto comments before any handler, so an invalid request writes nothing.
// It checks shapes only: page tokens and watch cursors are sealed for a
// tenant, known after authentication, so their handlers open them
// (pagetoken.go).
// validationStreamInterceptor (watch.go) applies the same rules to streams.
func validationInterceptor(validate func(req any) error) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := validate(req); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Limits of the proto comments; a submission's own are jobspec's.
const (
	maxNameLen      = jobspec.MaxNameLen
	maxPageSize     = 500
	defaultPageSize = 50
)

func (s *jobService) validate(req any) error {
	var v violations
	if _, batch := req.(*oncejobv1.SubmitJobsRequest); !batch {
		validateText(req, &v) // a batch's items are checked one by one (submitJobsItem)
	}
	switch r := req.(type) {
	case *oncejobv1.SubmitJobRequest:
		s.validateSubmit(r, &v)
	case *oncejobv1.GetJobRequest:
		validateID(&r.JobId, "job_id", &v)
		if _, ok := oncejobv1.JobView_name[int32(r.GetView())]; !ok {
			v.add("view", "unknown view %d", r.GetView())
		}
	case *oncejobv1.WatchJobRequest:
		validateID(&r.JobId, "job_id", &v)
		if r.GetAfterSeq() < 0 {
			v.add("after_seq", "must not be negative")
		}
	case *oncejobv1.WatchJobsRequest:
		if _, ok := oncejobv1.JobStatus_name[int32(r.GetStatus())]; !ok {
			v.add("status", "unknown status %d", r.GetStatus())
		}
	case *oncejobv1.CancelJobRequest:
		validateID(&r.JobId, "job_id", &v)
		validateReason(r.GetReason(), &v)
	case *oncejobv1.ReplayJobRequest:
		validateID(&r.JobId, "job_id", &v)
		validateReason(r.GetReason(), &v)
		if _, ok := oncejobv1.JobStage_name[int32(r.GetFromStage())]; !ok {
			v.add("from_stage", "unknown stage %d", r.GetFromStage())
		} else if r.GetFromStage() == oncejobv1.JobStage_JOB_STAGE_PUBLISHED {
			v.add("from_stage", "PUBLISHED cannot be re-run; replay from VALIDATED or earlier")
		}
	case *oncejobv1.ResolveJobRequest:
		validateID(&r.JobId, "job_id", &v)
		validateReason(r.GetReason(), &v)
		if r.GetResolution() != oncejobv1.Resolution_RESOLUTION_RETRY && r.GetResolution() != oncejobv1.Resolution_RESOLUTION_FAIL {
			v.add("resolution", "must be RESOLUTION_RETRY or RESOLUTION_FAIL")
		}
	case *oncejobv1.ApproveJobRequest:
		validateID(&r.JobId, "job_id", &v)
		validateReason(r.GetReason(), &v)
	case *oncejobv1.ListJobsRequest:
		if r.GetPageSize() < 0 || r.GetPageSize() > maxPageSize {
			v.add("page_size", "must be between 0 and %d", maxPageSize)
		}
		if _, ok := oncejobv1.JobStatus_name[int32(r.GetStatus())]; !ok {
			v.add("status", "unknown status %d", r.GetStatus())
		}
		if r.GetRunId() != "" {
			validateID(&r.RunId, "run_id", &v)
		}
		if _, ok := oncejobv1.JobView_name[int32(r.GetView())]; !ok {
			v.add("view", "unknown view %d", r.GetView())
		}
	case *oncejobv1.SubmitJobsRequest:
		validateSubmitJobs(r, &v)
	default:
		s.validateRunRequest(req, &v)
		s.validateScheduleRequest(req, &v)
	}
	return v.err()
}

// validateSubmit checks r by SubmitJob's field rules (jobspec.Rules).
func (s *jobService) validateSubmit(r *oncejobv1.SubmitJobRequest, v *violations) {
	rules := jobspec.Rules{Pipelines: s.cfg.Pipelines, MaxDocumentBytes: s.cfg.MaxDocumentBytes, ProviderBatches: s.cfg.ProviderBatches}
	v.addSpec(rules.Check(r))
}

// validateID checks that *id is a UUID and rewrites it in canonical form
// (lower case, dashed, as the store returns ids): every handler, the
// idempotency fingerprint and the watch hub's match by id then see one
// spelling. uuid.Parse also takes upper case, no dashes, braces and
// "urn:uuid:"; before, such an id found its job in Postgres but WatchJob
// never matched its live events (issue #31, finding 9).
func validateID(id *string, field string, v *violations) {
	if *id == "" {
		v.add(field, "is required")
		return
	}
	u, err := uuid.Parse(*id)
	if err != nil {
		v.add(field, "must be a UUID")
		return
	}
	*id = u.String()
}

func validateReason(reason string, v *violations) {
	if len(reason) > maxReasonLen || !utf8.ValidString(reason) {
		v.add("reason", "must be valid UTF-8 of at most %d bytes", maxReasonLen)
	}
}
