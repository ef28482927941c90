package jobspec_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/jobspec"
	"github.com/oncejob/oncejob/pipeline"
)

const maxDoc = 1 << 10

func rules() jobspec.Rules {
	return jobspec.Rules{Pipelines: pipeline.Builtin(), MaxDocumentBytes: maxDoc}
}

// valid is a request that breaks no rule.
func valid() *oncejobv1.SubmitJobRequest {
	return &oncejobv1.SubmitJobRequest{
		Pipeline: "summarize",
		Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "hello"}, MediaType: "text/plain", Name: "a.txt"},
		Params:   &structpb.Struct{Fields: map[string]*structpb.Value{"lang": structpb.NewStringValue("en")}},
		Labels:   map[string]string{"team": "a"},
	}
}

// nested is a value n levels deep.
func nested(n int) *structpb.Value {
	v := structpb.NewStringValue("x")
	for range n - 1 {
		v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
	}
	return v
}

func manyParams(n int) *structpb.Struct {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for i := range n {
		s.Fields[strings.Repeat("k", i+1)] = structpb.NewBoolValue(true)
	}
	return s
}

func manyLabels(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[strings.Repeat("l", i%60+1)+string(rune('a'+i/60))] = "v"
	}
	return m
}

// TestCheck: each rule of SubmitJob, broken alone, is reported on its field
// and nowhere else; a valid request breaks none.
func TestCheck(t *testing.T) {
	t.Parallel()
	require.Empty(t, rules().Check(valid()))

	for _, tc := range []struct {
		name   string
		rules  func(*jobspec.Rules)
		change func(*oncejobv1.SubmitJobRequest)
		field  string
		desc   string // a part of the description
	}{
		{name: "no pipeline", change: func(r *oncejobv1.SubmitJobRequest) { r.Pipeline = "" }, field: "pipeline", desc: "is required; known pipelines: summarize"},
		{name: "unknown pipeline", change: func(r *oncejobv1.SubmitJobRequest) { r.Pipeline = "nope" }, field: "pipeline", desc: `unknown pipeline "nope"; known pipelines: summarize`},
		{name: "no document", change: func(r *oncejobv1.SubmitJobRequest) { r.Document = nil }, field: "document", desc: "is required, with document.text or document.data"},
		{name: "no content", change: func(r *oncejobv1.SubmitJobRequest) { r.Document.Content = nil }, field: "document", desc: "is required"},
		{name: "empty text", change: func(r *oncejobv1.SubmitJobRequest) { r.Document.Content = &oncejobv1.Document_Text{} }, field: "document", desc: "must not be empty"},
		{name: "empty data", change: func(r *oncejobv1.SubmitJobRequest) { r.Document.Content = &oncejobv1.Document_Data{} }, field: "document", desc: "must not be empty"},
		{
			name: "document too big",
			change: func(r *oncejobv1.SubmitJobRequest) {
				r.Document.Content = &oncejobv1.Document_Data{Data: make([]byte, maxDoc+1)}
				r.Document.MediaType = "application/pdf"
			},
			field: "document", desc: "is 1025 bytes; the limit is 1024 bytes (server flag --max-document-bytes)",
		},
		{name: "media type too long", change: func(r *oncejobv1.SubmitJobRequest) { r.Document.MediaType = "text/" + strings.Repeat("x", 251) }, field: "document.media_type", desc: "at most 255 characters"},
		{name: "not a media type", change: func(r *oncejobv1.SubmitJobRequest) { r.Document.MediaType = "not a type" }, field: "document.media_type", desc: "is not a media type"},
		{name: "name too long", change: func(r *oncejobv1.SubmitJobRequest) { r.Document.Name = strings.Repeat("n", 256) }, field: "document.name", desc: "valid UTF-8 of at most 255"},
		{name: "name not UTF-8", change: func(r *oncejobv1.SubmitJobRequest) { r.Document.Name = "\xff" }, field: "document.name", desc: "valid UTF-8"},
		{
			name: "NUL in a text document's data",
			change: func(r *oncejobv1.SubmitJobRequest) {
				r.Document.Content = &oncejobv1.Document_Data{Data: []byte("a\x00b")}
				r.Document.MediaType = "application/json"
			},
			field: "document.data", desc: "holds a NUL byte; a application/json document is text",
		},
		{name: "too many params", change: func(r *oncejobv1.SubmitJobRequest) { r.Params = manyParams(jobspec.MaxParams + 1) }, field: "params", desc: "at most 64 entries"},
		{name: "empty param key", change: func(r *oncejobv1.SubmitJobRequest) { r.Params.Fields[""] = structpb.NewBoolValue(true) }, field: "params", desc: "keys must be 1-128 characters"},
		{name: "long param key", change: func(r *oncejobv1.SubmitJobRequest) {
			r.Params.Fields[strings.Repeat("k", 129)] = structpb.NewBoolValue(true)
		}, field: "params", desc: "keys must be 1-128 characters"},
		{name: "NaN param", change: func(r *oncejobv1.SubmitJobRequest) { r.Params.Fields["n"] = structpb.NewNumberValue(math.NaN()) }, field: "params.n", desc: "numbers must be finite"},
		{
			name: "infinite param deep in a list",
			change: func(r *oncejobv1.SubmitJobRequest) {
				r.Params.Fields["n"] = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewNumberValue(math.Inf(-1))}})
			},
			field: "params.n", desc: "numbers must be finite",
		},
		{name: "param too deep", change: func(r *oncejobv1.SubmitJobRequest) { r.Params.Fields["d"] = nested(33) }, field: "params.d", desc: "nests deeper than 32 levels"},
		{name: "param value too big", change: func(r *oncejobv1.SubmitJobRequest) {
			r.Params.Fields["big"] = structpb.NewStringValue(strings.Repeat("x", 64<<10))
		}, field: "params.big", desc: "is over 64 KiB as JSON"},
		{
			name: "params too big in all",
			change: func(r *oncejobv1.SubmitJobRequest) {
				for _, k := range []string{"a", "b", "c", "d", "e"} {
					r.Params.Fields[k] = structpb.NewStringValue(strings.Repeat("x", 60<<10))
				}
			},
			field: "params", desc: "are over 256 KiB as JSON in all",
		},
		{name: "too many labels", change: func(r *oncejobv1.SubmitJobRequest) { r.Labels = manyLabels(jobspec.MaxLabels + 1) }, field: "labels", desc: "at most 64 entries"},
		{name: "empty label key", change: func(r *oncejobv1.SubmitJobRequest) { r.Labels[""] = "v" }, field: "labels", desc: "keys must be 1-63 characters"},
		{name: "long label key", change: func(r *oncejobv1.SubmitJobRequest) { r.Labels[strings.Repeat("k", 64)] = "v" }, field: "labels", desc: "keys must be 1-63 characters"},
		{name: "long label value", change: func(r *oncejobv1.SubmitJobRequest) { r.Labels["team"] = strings.Repeat("v", 256) }, field: "labels.team", desc: "must be at most 255 characters"},
		{name: "unknown priority", change: func(r *oncejobv1.SubmitJobRequest) { r.Priority = 7 }, field: "priority", desc: "must be PRIORITY_INTERACTIVE, PRIORITY_BATCH or unset, not 7"},
		{name: "profile not the pipeline's", change: func(r *oncejobv1.SubmitJobRequest) { r.ModelProfile = "other" }, field: "model_profile", desc: `pipeline "summarize" allows default`},
		{
			name:   "batch twin without a batch API",
			change: func(r *oncejobv1.SubmitJobRequest) { r.ModelProfile = "default" + pipeline.BatchTwinSuffix },
			field:  "model_profile", desc: `"default@batch" sends its calls through a provider batch`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rs := rules()
			if tc.rules != nil {
				tc.rules(&rs)
			}
			r := valid()
			tc.change(r)
			v := rs.Check(r)
			require.Len(t, v, 1, "%v", v)
			require.Equal(t, tc.field, v[0].Field)
			require.Contains(t, v[0].Description, tc.desc)
		})
	}
}

// TestCheckAllowed: what the rules allow at their bounds.
func TestCheckAllowed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		rules  func(*jobspec.Rules)
		change func(*oncejobv1.SubmitJobRequest)
	}{
		{name: "document at the limit", change: func(r *oncejobv1.SubmitJobRequest) {
			r.Document.Content = &oncejobv1.Document_Text{Text: strings.Repeat("x", maxDoc)}
		}},
		{name: "no media type", change: func(r *oncejobv1.SubmitJobRequest) { r.Document.MediaType = "" }},
		{name: "NUL in a binary document", change: func(r *oncejobv1.SubmitJobRequest) {
			r.Document.Content = &oncejobv1.Document_Data{Data: []byte("%PDF\x00")}
			r.Document.MediaType = "application/pdf"
		}},
		{name: "64 params", change: func(r *oncejobv1.SubmitJobRequest) { r.Params = manyParams(jobspec.MaxParams) }},
		{name: "param 32 deep", change: func(r *oncejobv1.SubmitJobRequest) { r.Params.Fields["d"] = nested(32) }},
		{name: "64 labels", change: func(r *oncejobv1.SubmitJobRequest) { r.Labels = manyLabels(jobspec.MaxLabels) }},
		{name: "the pipeline's profile", change: func(r *oncejobv1.SubmitJobRequest) { r.ModelProfile = "default" }},
		{
			name:   "batch twin with a batch API",
			rules:  func(rs *jobspec.Rules) { rs.ProviderBatches = true },
			change: func(r *oncejobv1.SubmitJobRequest) { r.ModelProfile = "default" + pipeline.BatchTwinSuffix },
		},
	} {
		rs := rules()
		if tc.rules != nil {
			tc.rules(&rs)
		}
		r := valid()
		tc.change(r)
		require.Empty(t, rs.Check(r), tc.name)
	}
}

// TestCheckReportsEveryRule: violations of several fields are all reported,
// in the order the fields are checked.
func TestCheckReportsEveryRule(t *testing.T) {
	t.Parallel()
	r := &oncejobv1.SubmitJobRequest{Labels: map[string]string{"": "v"}, ModelProfile: "x@batch"}
	var fields []string
	for _, fe := range rules().Check(r) {
		fields = append(fields, fe.Field)
	}
	require.Equal(t, []string{"pipeline", "document", "labels", "model_profile"}, fields)
}

func TestError(t *testing.T) {
	t.Parallel()
	require.NoError(t, jobspec.Violations(nil).Err())

	var v jobspec.Violations
	v.Add("pipeline", "unknown pipeline %q", "x")
	v.Add("labels", "at most %d entries", 64)
	err := v.Prefixed("items[2].request.").Err()
	require.ErrorIs(t, err, jobspec.ErrInvalid)
	var je *jobspec.Error
	require.ErrorAs(t, err, &je)
	require.Equal(t, `invalid request: items[2].request.pipeline: unknown pipeline "x" (and 1 more)`, err.Error())
	require.Equal(t, "items[2].request.labels", je.Violations[1].Field)
	require.Equal(t, "at most 64 entries", je.Violations[1].Description)
	require.NotErrorIs(t, errors.New("invalid request"), jobspec.ErrInvalid)
}

func TestPrintableKey(t *testing.T) {
	t.Parallel()
	require.Equal(t, "lang", jobspec.PrintableKey("lang"))
	for _, k := range []string{"\xff", "a\x00b", strings.Repeat("k", jobspec.MaxParamKeyLen+1)} {
		require.Equal(t, "?", jobspec.PrintableKey(k), "%q", k)
	}
}
