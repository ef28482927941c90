package jobkey_test

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/jobkey"
)

func baseComputation() jobkey.Computation {
	return jobkey.Computation{
		Tenant:          "acme",
		DocumentSHA256:  jobkey.DocumentSHA256([]byte("hello")),
		MediaType:       "text/plain",
		Pipeline:        "summarize",
		PipelineVersion: 1,
		PromptVersion:   "1",
		ModelProfile:    "default",
		Params:          map[string]any{"language": "en", "max_words": float64(50)},
	}
}

func TestDedupKeyStableUnderPresentation(t *testing.T) {
	t.Parallel()
	base, err := jobkey.DedupKey(baseComputation())
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(base, "dedup:v1:"))

	// Params decoded from JSON with another key order, surrounding white
	// space and another spelling of the same number.
	var params map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{ "max_words" : 5.0e1,  "language":"  en\t" }`), &params))
	c := baseComputation()
	c.Params = params
	got, err := jobkey.DedupKey(c)
	require.NoError(t, err)
	require.Equal(t, base, got)
}

func TestDedupKeyChangesWithEachIdentityField(t *testing.T) {
	t.Parallel()
	base, err := jobkey.DedupKey(baseComputation())
	require.NoError(t, err)

	for name, mutate := range map[string]func(*jobkey.Computation){
		"tenant":           func(c *jobkey.Computation) { c.Tenant = "globex" },
		"document":         func(c *jobkey.Computation) { c.DocumentSHA256 = jobkey.DocumentSHA256([]byte("hello!")) },
		"media type":       func(c *jobkey.Computation) { c.MediaType = "text/html" },
		"pipeline":         func(c *jobkey.Computation) { c.Pipeline = "classify" },
		"pipeline version": func(c *jobkey.Computation) { c.PipelineVersion = 2 },
		"prompt version":   func(c *jobkey.Computation) { c.PromptVersion = "2" },
		"model profile":    func(c *jobkey.Computation) { c.ModelProfile = "large" },
		"param value":      func(c *jobkey.Computation) { c.Params["language"] = "de" },
		"param added":      func(c *jobkey.Computation) { c.Params["tone"] = "dry" },
		"param type":       func(c *jobkey.Computation) { c.Params["max_words"] = "50" },
	} {
		c := baseComputation()
		mutate(&c)
		got, err := jobkey.DedupKey(c)
		require.NoError(t, err)
		require.NotEqual(t, base, got, name)
	}
}

func TestFingerprintIgnoresNothingButTransport(t *testing.T) {
	t.Parallel()
	r := jobkey.Request{Pipeline: "summarize", DocumentSHA256: "ab", MediaType: "text/plain", Params: map[string]any{"a": "b"}}
	base, err := jobkey.Fingerprint(r)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(base, "fp:v1:"))
	for name, mutate := range map[string]func(*jobkey.Request){
		"name":          func(r *jobkey.Request) { r.DocumentName = "x.txt" },
		"model profile": func(r *jobkey.Request) { r.ModelProfile = "default" },
		"params":        func(r *jobkey.Request) { r.Params = map[string]any{"a": "c"} },
		"document":      func(r *jobkey.Request) { r.DocumentSHA256 = "cd" },
	} {
		m := r
		mutate(&m)
		got, err := jobkey.Fingerprint(m)
		require.NoError(t, err)
		require.NotEqual(t, base, got, name)
	}
}

func TestNormalizeMediaType(t *testing.T) {
	t.Parallel()
	got, err := jobkey.NormalizeMediaType(" Text/HTML; Charset=utf-8 ")
	require.NoError(t, err)
	require.Equal(t, "text/html; charset=utf-8", got)
	got, err = jobkey.NormalizeMediaType("")
	require.NoError(t, err)
	require.Equal(t, "text/plain", got)
	_, err = jobkey.NormalizeMediaType("not a media type;;")
	require.Error(t, err)
}

func TestCanonicalRejectsNonJSONNumbers(t *testing.T) {
	t.Parallel()
	_, err := jobkey.Canonical(map[string]any{"x": math.NaN()})
	require.Error(t, err)
}

// FuzzCanonical checks that the canonical form is injective up to
// Normalize: two JSON documents share an encoding exactly when they are
// equal after normalisation, and the encoding is itself canonical JSON.
func FuzzCanonical(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"a":1,"b":"x"}`, `{"b":" x ","a":1.0}`},
		{`["ab","c"]`, `["a","bc"]`},
		{`{"a":"b,c"}`, `{"a,b":"c"}`},
		{`{"":null}`, `{"":false}`},
		{`-0`, `0`},
		{`1e21`, `1000000000000000000000`},
		{`"\u003c"`, `"<"`},
		{`[1,[2]]`, `[[1],2]`},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		va, okA := decode(a)
		vb, okB := decode(b)
		if !okA || !okB {
			return
		}
		ca, errA := jobkey.Canonical(va)
		cb, errB := jobkey.Canonical(vb)
		if errA != nil || errB != nil {
			t.Fatalf("canonical failed on valid JSON: %v %v", errA, errB)
		}
		na, _ := jobkey.Normalize(va)
		nb, _ := jobkey.Normalize(vb)
		if (string(ca) == string(cb)) != reflect.DeepEqual(na, nb) {
			t.Fatalf("injectivity broken:\n a=%q -> %s\n b=%q -> %s", a, ca, b, cb)
		}
		// The encoding is valid JSON and a fixed point.
		again, ok := decode(string(ca))
		if !ok {
			t.Fatalf("canonical form is not JSON: %s", ca)
		}
		cc, err := jobkey.Canonical(again)
		if err != nil || string(cc) != string(ca) {
			t.Fatalf("canonical form is not a fixed point: %s -> %s", ca, cc)
		}
	})
}

func decode(s string) (any, bool) {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, false
	}
	return v, true
}
