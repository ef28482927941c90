package jobspec

import (
	"bytes"
	"math"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/jobkey"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/store"
)

// Limits of the proto comments.
const (
	MaxParams      = 64
	MaxParamKeyLen = 128
	MaxLabels      = 64
	MaxLabelKeyLen = 63
	MaxLabelValLen = 255
	MaxNameLen     = 255
)

// Rules are the server's settings a submission is checked against.
type Rules struct {
	// Pipelines are the pipelines a job may name.
	Pipelines *pipeline.Registry
	// MaxDocumentBytes bounds a document (the server's
	// --max-document-bytes).
	MaxDocumentBytes int
	// ProviderBatches is whether the LLM provider has a batch API, which a
	// batch twin model profile needs.
	ProviderBatches bool
}

// Check returns every field rule of SubmitJob that r breaks, fields named
// by their path in r. It checks the fields SubmitJob gives meaning to; the
// generic string rules of every request (valid UTF-8, no NUL, a length
// bound) are the caller's.
func (rules Rules) Check(r *oncejobv1.SubmitJobRequest) Violations {
	var v Violations
	p, known := rules.Pipelines.Get(r.GetPipeline())
	switch {
	case r.GetPipeline() == "":
		v.Add("pipeline", "is required; known pipelines: %s", strings.Join(rules.Pipelines.Names(), ", "))
	case !known:
		v.Add("pipeline", "unknown pipeline %q; known pipelines: %s", r.GetPipeline(), strings.Join(rules.Pipelines.Names(), ", "))
	}

	doc := r.GetDocument()
	switch {
	case doc == nil || doc.GetContent() == nil:
		v.Add("document", "is required, with document.text or document.data")
	case DocumentSize(doc) == 0:
		v.Add("document", "must not be empty")
	case DocumentSize(doc) > rules.MaxDocumentBytes:
		v.Add("document", "is %d bytes; the limit is %d bytes (server flag --max-document-bytes)", DocumentSize(doc), rules.MaxDocumentBytes)
	}
	if doc != nil {
		if len(doc.GetMediaType()) > MaxNameLen {
			v.Add("document.media_type", "must be at most %d characters", MaxNameLen)
		} else if _, err := jobkey.NormalizeMediaType(doc.GetMediaType()); err != nil {
			v.Add("document.media_type", "is not a media type: %s", err)
		}
		if len(doc.GetName()) > MaxNameLen || !utf8.ValidString(doc.GetName()) {
			v.Add("document.name", "must be valid UTF-8 of at most %d characters", MaxNameLen)
		}
		if mt, err := jobkey.NormalizeMediaType(doc.GetMediaType()); err == nil && isTextMedia(mt) && bytes.IndexByte(doc.GetData(), 0) >= 0 {
			v.Add("document.data", "holds a NUL byte; a %s document is text, and text cannot hold NUL", mt)
		}
	}

	v = append(v, CheckParams(r.GetParams())...)
	v = append(v, CheckLabels(r.GetLabels())...)

	if known && r.GetModelProfile() != "" && !p.AllowsModelProfile(r.GetModelProfile()) {
		v.Add("model_profile", "pipeline %q allows %s", p.Name, strings.Join(p.ModelProfiles, ", "))
	} else if strings.HasSuffix(r.GetModelProfile(), pipeline.BatchTwinSuffix) && !rules.ProviderBatches {
		v.Add("model_profile", "%q sends its calls through a provider batch, and the server's LLM provider has no batch API", r.GetModelProfile())
	}
	if _, ok := priorities[r.GetPriority()]; !ok {
		v.Add("priority", "must be PRIORITY_INTERACTIVE, PRIORITY_BATCH or unset, not %d", int32(r.GetPriority()))
	}
	return v
}

// priorities are the stored priority of each value of the API's; unset
// is the store's default (store.JobSubmitParams.PriorityOf).
var priorities = map[oncejobv1.Priority]store.JobPriority{
	oncejobv1.Priority_PRIORITY_UNSPECIFIED: "",
	oncejobv1.Priority_PRIORITY_INTERACTIVE: store.JobPriorityInteractive,
	oncejobv1.Priority_PRIORITY_BATCH:       store.JobPriorityBatch,
}

// CheckParams checks params by SubmitJob's rules (a run's params are
// checked by them too: they become its items').
func CheckParams(params *structpb.Struct) Violations {
	var v Violations
	if f := params.GetFields(); len(f) > MaxParams {
		v.Add("params", "at most %d entries", MaxParams)
	} else {
		for k, val := range f {
			if k == "" || len(k) > MaxParamKeyLen {
				v.Add("params", "keys must be 1-%d characters", MaxParamKeyLen)
			}
			if !finite(val) {
				v.Add("params."+PrintableKey(k), "numbers must be finite")
			}
		}
	}
	checkParamsSize(params, &v)
	return v
}

// CheckLabels checks labels by SubmitJob's rules.
func CheckLabels(labels map[string]string) Violations {
	var v Violations
	if len(labels) > MaxLabels {
		v.Add("labels", "at most %d entries", MaxLabels)
	}
	for k, val := range labels {
		if k == "" || len(k) > MaxLabelKeyLen {
			v.Add("labels", "keys must be 1-%d characters", MaxLabelKeyLen)
		}
		if len(val) > MaxLabelValLen {
			v.Add("labels."+k, "must be at most %d characters", MaxLabelValLen)
		}
	}
	return v
}

// PrintableKey is a map key as a field path shows it: a key that is itself
// bad is not echoed back.
func PrintableKey(k string) string {
	if !utf8.ValidString(k) || strings.IndexByte(k, 0) >= 0 || len(k) > MaxParamKeyLen {
		return "?"
	}
	return k
}

// DocumentSize is the size of d's content in bytes.
func DocumentSize(d *oncejobv1.Document) int {
	if t, ok := d.GetContent().(*oncejobv1.Document_Text); ok {
		return len(t.Text)
	}
	return len(d.GetData())
}

// DocumentBytes is d's content: its text or its data.
func DocumentBytes(d *oncejobv1.Document) []byte {
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
