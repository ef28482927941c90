package server

import (
	"bytes"
	"context"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/jobkey"
	"github.com/oncejob/oncejob/pipeline"
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

// Limits of the proto comments.
const (
	maxParams       = 64
	maxParamKeyLen  = 128
	maxLabels       = 64
	maxLabelKeyLen  = 63
	maxLabelValLen  = 255
	maxNameLen      = 255
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
		validateJobID(r.GetJobId(), "job_id", &v)
		if _, ok := oncejobv1.JobView_name[int32(r.GetView())]; !ok {
			v.add("view", "unknown view %d", r.GetView())
		}
	case *oncejobv1.WatchJobRequest:
		validateJobID(r.GetJobId(), "job_id", &v)
		if r.GetAfterSeq() < 0 {
			v.add("after_seq", "must not be negative")
		}
	case *oncejobv1.WatchJobsRequest:
		if _, ok := oncejobv1.JobStatus_name[int32(r.GetStatus())]; !ok {
			v.add("status", "unknown status %d", r.GetStatus())
		}
	case *oncejobv1.CancelJobRequest:
		validateJobID(r.GetJobId(), "job_id", &v)
		validateReason(r.GetReason(), &v)
	case *oncejobv1.ReplayJobRequest:
		validateJobID(r.GetJobId(), "job_id", &v)
		validateReason(r.GetReason(), &v)
		if _, ok := oncejobv1.JobStage_name[int32(r.GetFromStage())]; !ok {
			v.add("from_stage", "unknown stage %d", r.GetFromStage())
		} else if r.GetFromStage() == oncejobv1.JobStage_JOB_STAGE_PUBLISHED {
			v.add("from_stage", "PUBLISHED cannot be re-run; replay from VALIDATED or earlier")
		}
	case *oncejobv1.ResolveJobRequest:
		validateJobID(r.GetJobId(), "job_id", &v)
		validateReason(r.GetReason(), &v)
		if r.GetResolution() != oncejobv1.Resolution_RESOLUTION_RETRY && r.GetResolution() != oncejobv1.Resolution_RESOLUTION_FAIL {
			v.add("resolution", "must be RESOLUTION_RETRY or RESOLUTION_FAIL")
		}
	case *oncejobv1.ApproveJobRequest:
		validateJobID(r.GetJobId(), "job_id", &v)
		validateReason(r.GetReason(), &v)
	case *oncejobv1.ListJobsRequest:
		if r.GetPageSize() < 0 || r.GetPageSize() > maxPageSize {
			v.add("page_size", "must be between 0 and %d", maxPageSize)
		}
		if _, ok := oncejobv1.JobStatus_name[int32(r.GetStatus())]; !ok {
			v.add("status", "unknown status %d", r.GetStatus())
		}
		if r.GetRunId() != "" {
			validateJobID(r.GetRunId(), "run_id", &v)
		}
	case *oncejobv1.SubmitJobsRequest:
		validateSubmitJobs(r, &v)
	default:
		s.validateRunRequest(req, &v)
		s.validateScheduleRequest(req, &v)
	}
	return v.err()
}

func (s *jobService) validateSubmit(r *oncejobv1.SubmitJobRequest, v *violations) {
	p, known := s.cfg.Pipelines.Get(r.GetPipeline())
	switch {
	case r.GetPipeline() == "":
		v.add("pipeline", "is required; known pipelines: %s", strings.Join(s.cfg.Pipelines.Names(), ", "))
	case !known:
		v.add("pipeline", "unknown pipeline %q; known pipelines: %s", r.GetPipeline(), strings.Join(s.cfg.Pipelines.Names(), ", "))
	}

	doc := r.GetDocument()
	switch {
	case doc == nil || doc.GetContent() == nil:
		v.add("document", "is required, with document.text or document.data")
	case documentSize(doc) == 0:
		v.add("document", "must not be empty")
	case documentSize(doc) > s.cfg.MaxDocumentBytes:
		v.add("document", "is %d bytes; the limit is %d bytes (server flag --max-document-bytes)", documentSize(doc), s.cfg.MaxDocumentBytes)
	}
	if doc != nil {
		if len(doc.GetMediaType()) > maxNameLen {
			v.add("document.media_type", "must be at most %d characters", maxNameLen)
		} else if _, err := jobkey.NormalizeMediaType(doc.GetMediaType()); err != nil {
			v.add("document.media_type", "is not a media type: %s", err)
		}
		if len(doc.GetName()) > maxNameLen || !utf8.ValidString(doc.GetName()) {
			v.add("document.name", "must be valid UTF-8 of at most %d characters", maxNameLen)
		}
		if mt, err := jobkey.NormalizeMediaType(doc.GetMediaType()); err == nil && isTextMedia(mt) && bytes.IndexByte(doc.GetData(), 0) >= 0 {
			v.add("document.data", "holds a NUL byte; a %s document is text, and text cannot hold NUL", mt)
		}
	}

	validateParams(r.GetParams(), v)
	validateLabels(r.GetLabels(), v)

	if known && r.GetModelProfile() != "" && !p.AllowsModelProfile(r.GetModelProfile()) {
		v.add("model_profile", "pipeline %q allows %s", p.Name, strings.Join(p.ModelProfiles, ", "))
	} else if strings.HasSuffix(r.GetModelProfile(), pipeline.BatchTwinSuffix) && !s.cfg.ProviderBatches {
		v.add("model_profile", "%q sends its calls through a provider batch, and the server's LLM provider has no batch API", r.GetModelProfile())
	}
}

// validateParams checks params by SubmitJob's rules.
func validateParams(params *structpb.Struct, v *violations) {
	if f := params.GetFields(); len(f) > maxParams {
		v.add("params", "at most %d entries", maxParams)
	} else {
		for k, val := range f {
			if k == "" || len(k) > maxParamKeyLen {
				v.add("params", "keys must be 1-%d characters", maxParamKeyLen)
			}
			if !finite(val) {
				v.add("params."+printableKey(k), "numbers must be finite")
			}
		}
	}
	validateParamsSize(params, v)
}

// validateLabels checks labels by SubmitJob's rules.
func validateLabels(labels map[string]string, v *violations) {
	if len(labels) > maxLabels {
		v.add("labels", "at most %d entries", maxLabels)
	}
	for k, val := range labels {
		if k == "" || len(k) > maxLabelKeyLen {
			v.add("labels", "keys must be 1-%d characters", maxLabelKeyLen)
		}
		if len(val) > maxLabelValLen {
			v.add("labels."+k, "must be at most %d characters", maxLabelValLen)
		}
	}
}

func validateJobID(id, field string, v *violations) {
	if id == "" {
		v.add(field, "is required")
	} else if _, err := uuid.Parse(id); err != nil {
		v.add(field, "must be a UUID")
	}
}

func validateReason(reason string, v *violations) {
	if len(reason) > maxReasonLen || !utf8.ValidString(reason) {
		v.add("reason", "must be valid UTF-8 of at most %d bytes", maxReasonLen)
	}
}

func documentSize(d *oncejobv1.Document) int {
	if t, ok := d.GetContent().(*oncejobv1.Document_Text); ok {
		return len(t.Text)
	}
	return len(d.GetData())
}

func documentBytes(d *oncejobv1.Document) []byte {
	if t, ok := d.GetContent().(*oncejobv1.Document_Text); ok {
		return []byte(t.Text)
	}
	return d.GetData()
}

// finite reports whether every number in v is finite: JSON has no NaN.
func finite(v *structpb.Value) bool {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		return !math.IsNaN(k.NumberValue) && !math.IsInf(k.NumberValue, 0)
	case *structpb.Value_StructValue:
		for _, e := range k.StructValue.GetFields() {
			if !finite(e) {
				return false
			}
		}
	case *structpb.Value_ListValue:
		for _, e := range k.ListValue.GetValues() {
			if !finite(e) {
				return false
			}
		}
	}
	return true
}

// isTextMedia reports whether the engine reads a document of media type mt
// (normalised) as text (worker/extract.go): such a document cannot hold a
// NUL byte, which no text column holds.
func isTextMedia(mt string) bool {
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json")
}
