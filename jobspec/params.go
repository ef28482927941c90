package jobspec

import (
	"encoding/json"
	"maps"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/jobkey"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/store"
)

// SubmitMethod is the method scope of a job's idempotency key: a job the
// scheduler submits shares SubmitJob's, as a SubmitJobs item does.
const SubmitMethod = oncejobv1.JobService_SubmitJob_FullMethodName

// Key is the identity a job is submitted under.
type Key struct {
	Tenant string
	Method string // the method scope, SubmitMethod for every job
	Value  string // the idempotency key
}

// Params is what the store needs to submit req under key: every key the
// server computes (dedup key, fingerprint), a new job id, and the
// document. req should pass Rules.Check; a pipeline pipelines lacks, or
// params that have no canonical JSON, are an *Error all the same.
// Traceparent and RunID are left to the caller.
func Params(pipelines *pipeline.Registry, key Key, req *oncejobv1.SubmitJobRequest) (*store.JobSubmitParams, error) {
	p, ok := pipelines.Get(req.GetPipeline())
	if !ok {
		var v Violations
		v.Add("pipeline", "unknown pipeline %q", req.GetPipeline())
		return nil, v.Err()
	}
	doc := req.GetDocument()
	data := DocumentBytes(doc)
	mediaType, err := jobkey.NormalizeMediaType(doc.GetMediaType())
	if err != nil {
		var v Violations
		v.Add("document.media_type", "is not a media type: %s", err)
		return nil, v.Err()
	}
	docSHA := jobkey.DocumentSHA256(data)
	params := req.GetParams().AsMap()

	profile := req.GetModelProfile()
	if profile == "" {
		profile = p.DefaultModelProfile()
	}
	paramsError := func(err error) error {
		var v Violations
		v.Add("params", "%v", err)
		return v.Err()
	}
	// The params' canonical JSON, written once: the job's, and in both keys.
	canonicalParams, err := jobkey.Canonical(params)
	if err != nil {
		return nil, paramsError(err)
	}
	dedupKey, err := jobkey.DedupKey(jobkey.Computation{
		Tenant:          key.Tenant,
		DocumentSHA256:  docSHA,
		MediaType:       mediaType,
		Pipeline:        p.Name,
		PipelineVersion: p.Version,
		PromptVersion:   p.Prompt.Version,
		ModelProfile:    profile,
		CanonicalParams: canonicalParams,
	})
	if err != nil {
		return nil, paramsError(err)
	}
	fingerprint, err := jobkey.Fingerprint(jobkey.Request{
		Pipeline:        req.GetPipeline(),
		DocumentSHA256:  docSHA,
		MediaType:       mediaType,
		DocumentName:    doc.GetName(),
		ModelProfile:    req.GetModelProfile(),
		CanonicalParams: canonicalParams,
	})
	if err != nil {
		return nil, paramsError(err)
	}
	return &store.JobSubmitParams{
		ID:              NewID(),
		Tenant:          key.Tenant,
		Method:          key.Method,
		IdempotencyKey:  key.Value,
		Fingerprint:     fingerprint,
		DedupKey:        dedupKey,
		Pipeline:        p.Name,
		PipelineVersion: p.Version,
		PromptVersion:   p.Prompt.Version,
		ModelProfile:    profile,
		Document:        data,
		DocumentSHA256:  docSHA,
		DocumentMedia:   mediaType,
		DocumentName:    doc.GetName(),
		Params:          canonicalParams,
		Labels:          req.GetLabels(),
		Priority:        priorities[req.GetPriority()],
	}, nil
}

// CanonicalParams is the canonical JSON of params as Params writes a
// job's (an empty object for nil): what the job's row of a run's item
// keeps of its own params, without the run's (docs/architecture.md,
// "Runs"). Params that have none are an *Error.
func CanonicalParams(params *structpb.Struct) ([]byte, error) {
	out, err := jobkey.Canonical(params.AsMap())
	if err != nil {
		var v Violations
		v.Add("params", "%v", err)
		return nil, v.Err()
	}
	return out, nil
}

// NewID is a new resource id: a UUIDv7, so ids sort by creation.
func NewID() string {
	return uuid.Must(uuid.NewV7()).String() // fails only if the system's randomness does
}

// RunParams is a run's params as a struct, nil when it has none (or they do
// not decode).
func RunParams(r *store.Run) *structpb.Struct {
	if len(r.Params) <= 2 { // "{}"
		return nil
	}
	var m map[string]any
	if json.Unmarshal(r.Params, &m) != nil {
		return nil
	}
	st, _ := structpb.NewStruct(m)
	return st
}

// WithRunDefaults fills req's empty pipeline and model profile with the
// run's, and puts the run's params (decoded once per call: RunParams) and
// labels under req's own. A nil req is left alone.
func WithRunDefaults(req *oncejobv1.SubmitJobRequest, run *store.Run, params *structpb.Struct) {
	if req == nil {
		return
	}
	if req.Pipeline == "" {
		req.Pipeline = run.Pipeline
	}
	if req.ModelProfile == "" {
		req.ModelProfile = run.ModelProfile
	}
	if params != nil {
		// The values are shared between items, read only from here on.
		merged := &structpb.Struct{Fields: maps.Clone(params.Fields)}
		maps.Copy(merged.Fields, req.GetParams().GetFields())
		req.Params = merged
	}
	if len(run.Labels) > 0 {
		labels := maps.Clone(run.Labels)
		maps.Copy(labels, req.GetLabels())
		req.Labels = labels
	}
}

// WithBatchTwin gives a provider_batch run's item the batch twin of its
// model profile (its own, else its pipeline's default); an unknown
// pipeline is left to Check.
func WithBatchTwin(req *oncejobv1.SubmitJobRequest, pipelines *pipeline.Registry) {
	p, ok := pipelines.Get(req.GetPipeline())
	if !ok {
		return
	}
	profile := req.GetModelProfile()
	if profile == "" {
		profile = p.DefaultModelProfile()
	}
	req.ModelProfile = pipelines.BatchTwin(profile)
}
