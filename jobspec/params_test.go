package jobspec_test

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/jobkey"
	"github.com/oncejob/oncejob/jobspec"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/store"
)

var key = jobspec.Key{Tenant: "t", Method: jobspec.SubmitMethod, Value: "k1"}

// TestParams: a valid request becomes the store params SubmitJob writes.
func TestParams(t *testing.T) {
	t.Parallel()
	reg := pipeline.Builtin()
	p, err := jobspec.Params(reg, key, valid())
	require.NoError(t, err)
	id, err := uuid.Parse(p.ID)
	require.NoError(t, err)
	require.Equal(t, uuid.Version(7), id.Version())
	require.Equal(t, "t", p.Tenant)
	require.Equal(t, "/oncejob.v1.JobService/SubmitJob", p.Method)
	require.Equal(t, "k1", p.IdempotencyKey)
	require.Equal(t, "summarize", p.Pipeline)
	require.Equal(t, int32(1), p.PipelineVersion)
	require.Equal(t, "1", p.PromptVersion)
	require.Equal(t, "default", p.ModelProfile, "the pipeline's default profile")
	require.Equal(t, []byte("hello"), p.Document)
	require.Equal(t, jobkey.DocumentSHA256([]byte("hello")), p.DocumentSHA256)
	require.Equal(t, "text/plain", p.DocumentMedia)
	require.Equal(t, "a.txt", p.DocumentName)
	require.JSONEq(t, `{"lang":"en"}`, string(p.Params))
	require.Equal(t, map[string]string{"team": "a"}, p.Labels)
	require.Empty(t, p.Traceparent)
	require.Empty(t, p.RunID)

	// Same request: same keys, another id. Labels are not part of the
	// request's identity; the tenant is part of the dedup key only.
	again, err := jobspec.Params(reg, key, valid())
	require.NoError(t, err)
	require.NotEqual(t, p.ID, again.ID)
	require.Equal(t, p.DedupKey, again.DedupKey)
	require.Equal(t, p.Fingerprint, again.Fingerprint)

	relabelled := valid()
	relabelled.Labels = map[string]string{"team": "b"}
	r, err := jobspec.Params(reg, key, relabelled)
	require.NoError(t, err)
	require.Equal(t, p.Fingerprint, r.Fingerprint)
	require.Equal(t, p.DedupKey, r.DedupKey)

	other, err := jobspec.Params(reg, jobspec.Key{Tenant: "u", Method: key.Method, Value: key.Value}, valid())
	require.NoError(t, err)
	require.NotEqual(t, p.DedupKey, other.DedupKey, "another tenant's computation is its own")
	require.Equal(t, p.Fingerprint, other.Fingerprint)

	explicit := valid()
	explicit.ModelProfile = "default"
	e, err := jobspec.Params(reg, key, explicit)
	require.NoError(t, err)
	require.Equal(t, p.DedupKey, e.DedupKey, "the default profile named is the same computation")
	require.NotEqual(t, p.Fingerprint, e.Fingerprint, "but another request")

	changed := valid()
	changed.Params.Fields["lang"] = structpb.NewStringValue("fr")
	c, err := jobspec.Params(reg, key, changed)
	require.NoError(t, err)
	require.NotEqual(t, p.DedupKey, c.DedupKey)
	require.NotEqual(t, p.Fingerprint, c.Fingerprint)

	data := valid()
	data.Document = &oncejobv1.Document{Content: &oncejobv1.Document_Data{Data: []byte("hello")}, MediaType: " Text/Plain ", Name: "a.txt"}
	d, err := jobspec.Params(reg, key, data)
	require.NoError(t, err)
	require.Equal(t, "text/plain", d.DocumentMedia, "normalised")
	require.Equal(t, p.DedupKey, d.DedupKey, "text or data, the same bytes are the same document")
}

// TestParamsErrors: what Params cannot make is a typed field error.
func TestParamsErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(*oncejobv1.SubmitJobRequest)
		field  string
	}{
		{"unknown pipeline", func(r *oncejobv1.SubmitJobRequest) { r.Pipeline = "nope" }, "pipeline"},
		{"not a media type", func(r *oncejobv1.SubmitJobRequest) { r.Document.MediaType = "not a type" }, "document.media_type"},
	} {
		r := valid()
		tc.change(r)
		p, err := jobspec.Params(pipeline.Builtin(), key, r)
		require.Nil(t, p, tc.name)
		require.ErrorIs(t, err, jobspec.ErrInvalid, tc.name)
		var je *jobspec.Error
		require.ErrorAs(t, err, &je, tc.name)
		require.Len(t, je.Violations, 1, tc.name)
		require.Equal(t, tc.field, je.Violations[0].Field, tc.name)
	}
}

func TestRunDefaults(t *testing.T) {
	t.Parallel()
	run := &store.Run{Pipeline: "summarize", ModelProfile: "default", Params: []byte(`{"lang":"de","tone":"dry"}`), Labels: map[string]string{"run": "r", "team": "x"}}
	defaults := jobspec.RunParams(run)
	require.NotNil(t, defaults)

	req := &oncejobv1.SubmitJobRequest{Params: &structpb.Struct{Fields: map[string]*structpb.Value{"lang": structpb.NewStringValue("en")}}, Labels: map[string]string{"team": "a"}}
	jobspec.WithRunDefaults(req, run, defaults)
	require.Equal(t, "summarize", req.GetPipeline())
	require.Equal(t, "default", req.GetModelProfile())
	require.Equal(t, map[string]any{"lang": "en", "tone": "dry"}, req.GetParams().AsMap(), "the item's own params win")
	require.Equal(t, map[string]string{"run": "r", "team": "a"}, req.GetLabels(), "the item's own labels win")
	require.Equal(t, map[string]any{"lang": "de", "tone": "dry"}, defaults.AsMap(), "the run's params are not changed")

	own := &oncejobv1.SubmitJobRequest{Pipeline: "p", ModelProfile: "m"}
	jobspec.WithRunDefaults(own, &store.Run{Pipeline: "summarize", ModelProfile: "default", Params: []byte(`{}`)}, nil)
	require.Equal(t, "p", own.GetPipeline())
	require.Equal(t, "m", own.GetModelProfile())
	require.Nil(t, own.GetParams())
	require.Nil(t, own.GetLabels())
	jobspec.WithRunDefaults(nil, run, defaults) // no request: nothing to do

	require.Nil(t, jobspec.RunParams(&store.Run{Params: []byte(`{}`)}))
	require.Nil(t, jobspec.RunParams(&store.Run{Params: []byte(`not json`)}))
}

func TestWithBatchTwin(t *testing.T) {
	t.Parallel()
	reg := pipeline.Builtin()
	req := &oncejobv1.SubmitJobRequest{Pipeline: "summarize"}
	jobspec.WithBatchTwin(req, reg)
	require.Equal(t, "default"+pipeline.BatchTwinSuffix, req.GetModelProfile(), "the default profile's twin")
	jobspec.WithBatchTwin(req, reg)
	require.Equal(t, "default"+pipeline.BatchTwinSuffix, req.GetModelProfile(), "a twin is its own twin")
	unknown := &oncejobv1.SubmitJobRequest{Pipeline: "nope", ModelProfile: "m"}
	jobspec.WithBatchTwin(unknown, reg)
	require.Equal(t, "m", unknown.GetModelProfile(), "an unknown pipeline is left to Check")
}

// TestRandomRequests: over seeded random requests, valid and not, Check
// and Params never panic, every error is a typed field error, and a request
// Check passes is one Params makes, with canonical JSON params.
func TestRandomRequests(t *testing.T) {
	t.Parallel()
	reg := pipeline.Builtin()
	passed, refused := 0, 0
	for seed := range uint64(1500) {
		rng := rand.New(rand.NewPCG(seed, 0x6a6f6273706563))
		req := randomRequest(rng)
		for _, batches := range []bool{false, true} {
			rs := jobspec.Rules{Pipelines: reg, MaxDocumentBytes: 1 << 12, ProviderBatches: batches}
			v := rs.Check(req)
			for _, fe := range v {
				require.NotNil(t, fe, "seed %d", seed)
				require.NotEmpty(t, fe.Field, "seed %d", seed)
				require.NotEmpty(t, fe.Description, "seed %d", seed)
			}
			if len(v) > 0 {
				require.ErrorIs(t, v.Err(), jobspec.ErrInvalid, "seed %d", seed)
			}
			p, err := jobspec.Params(reg, key, proto.CloneOf(req))
			if err != nil {
				require.Nil(t, p, "seed %d", seed)
				var je *jobspec.Error
				require.True(t, errors.As(err, &je), "seed %d: %T %v", seed, err, err)
				require.NotEmpty(t, je.Violations, "seed %d", seed)
				for _, fe := range je.Violations {
					require.NotEmpty(t, fe.Field, "seed %d", seed)
				}
			}
			if len(v) > 0 {
				refused++
			} else {
				passed++
				require.NoError(t, err, "seed %d: Check passed it", seed)
				require.True(t, json.Valid(p.Params), "seed %d", seed)
				require.Equal(t, jobspec.DocumentBytes(req.GetDocument()), p.Document, "seed %d", seed)
			}
		}
	}
	t.Logf("%d passed Check, %d refused", passed, refused)
	require.Greater(t, passed, 100, "the requests reach Params valid")
	require.Greater(t, refused, 100, "and invalid")
}

// randomRequest is a request of random fields; one in two breaks rules
// freely, the other stays mostly within them, so both Check's refusals and
// Params are reached.
func randomRequest(rng *rand.Rand) *oncejobv1.SubmitJobRequest {
	odds := 3 // one in odds of a choice is out of the rules
	if rng.IntN(2) == 0 {
		odds = 60
	}
	g := gen{rng: rng, odds: odds}
	r := &oncejobv1.SubmitJobRequest{
		Pipeline:     g.pick([]string{"summarize"}, "", "nope", "\xff"),
		ModelProfile: g.pick([]string{"", "default", "default@batch"}, "other", "x@batch"),
	}
	if !g.bad() {
		d := &oncejobv1.Document{
			MediaType: g.pick([]string{"", "text/plain", "application/json", "application/pdf", "TEXT/Markdown; charset=utf-8", "a+json"}, "not a type", ";;", strings.Repeat("x", 300)),
			Name:      g.pick([]string{"", "a.txt"}, "\xff", strings.Repeat("n", 256)),
		}
		switch {
		case g.bad():
		case rng.IntN(2) == 0:
			d.Content = &oncejobv1.Document_Text{Text: g.string(1 + rng.IntN(g.size(5000, 1<<12)))}
		default:
			b := make([]byte, 1+rng.IntN(g.size(5000, 1<<12)))
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			d.Content = &oncejobv1.Document_Data{Data: b}
		}
		r.Document = d
	}
	if rng.IntN(4) > 0 {
		r.Params = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		for range rng.IntN(g.size(70, 8)) {
			r.Params.Fields[g.string(1+rng.IntN(g.size(140, 20)))] = g.value(0)
		}
	}
	if rng.IntN(3) > 0 {
		r.Labels = map[string]string{}
		for range rng.IntN(g.size(70, 8)) {
			r.Labels[g.string(1+rng.IntN(g.size(70, 20)))] = g.string(rng.IntN(g.size(300, 20)))
		}
	}
	return r
}

type gen struct {
	rng  *rand.Rand
	odds int
}

// bad is true one time in g.odds.
func (g gen) bad() bool { return g.rng.IntN(g.odds) == 0 }

// pick is one of good, or now and then one of bad.
func (g gen) pick(good []string, bad ...string) string {
	if g.bad() {
		return bad[g.rng.IntN(len(bad))]
	}
	return good[g.rng.IntN(len(good))]
}

// size is a bound: wild past the rules now and then, else within them.
func (g gen) size(wild, tame int) int {
	if g.bad() {
		return wild
	}
	return tame
}

func (g gen) value(depth int) *structpb.Value {
	k := g.rng.IntN(8)
	if depth > 36 || (depth > 3 && !g.bad()) {
		k = 0
	}
	switch k {
	case 0:
		return structpb.NewNullValue()
	case 1:
		return structpb.NewBoolValue(g.rng.IntN(2) == 0)
	case 2:
		if g.bad() {
			return structpb.NewNumberValue([]float64{math.NaN(), math.Inf(1), math.Inf(-1)}[g.rng.IntN(3)])
		}
		return structpb.NewNumberValue([]float64{0, -1.5, 1e300, g.rng.NormFloat64()}[g.rng.IntN(4)])
	case 3:
		return structpb.NewStringValue(g.string(g.rng.IntN(20)))
	case 4:
		return structpb.NewStringValue(strings.Repeat("x", g.rng.IntN(g.size(80<<10, 100))))
	case 5:
		return structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{g.value(depth + 1)}})
	default:
		s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
		for range g.rng.IntN(3) {
			s.Fields[g.string(g.rng.IntN(8))] = g.value(depth + 1)
		}
		return structpb.NewStructValue(s)
	}
}

// string is n bytes of letters; now and then one is NUL or not UTF-8.
func (g gen) string(n int) string {
	b := make([]byte, n)
	for i := range b {
		switch {
		case g.rng.IntN(10*g.odds) == 0:
			b[i] = 0
		case g.rng.IntN(10*g.odds) == 0:
			b[i] = 0xff
		default:
			b[i] = byte('a' + g.rng.IntN(26))
		}
	}
	return string(b)
}
