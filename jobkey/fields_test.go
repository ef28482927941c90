package jobkey_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/jobkey"
)

// mapKey is DedupKey and Fingerprint as they were written before they
// wrote their fields themselves: the canonical JSON of a map.
func mapKey(t *testing.T, prefix string, fields map[string]any) string {
	b, err := jobkey.Canonical(fields)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	return prefix + hex.EncodeToString(sum[:])
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// TestKeysAreTheCanonicalJSONOfTheirFields: DedupKey and Fingerprint are
// the keys of the canonical JSON of their fields as a map, for strings
// that need trimming and escaping, any pipeline version, params or none,
// and params given already canonical.
func TestKeysAreTheCanonicalJSONOfTheirFields(t *testing.T) {
	t.Parallel()
	strs := []string{"", "acme", " padded\t", "quote\"back\\slash", "ctl\x01\n", "uni é ✓", "\u2028line\u2029", "bad\xffutf8", "<html>&"}
	paramsSets := []map[string]any{nil, {}, {"language": " en ", "max_words": float64(50)}, {"nested": map[string]any{"b": []any{1.5, "x", nil, true}, "a": math.Copysign(0, -1)}}}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() string { return strs[rng.IntN(len(strs))] }
	for i := range 400 {
		params := paramsSets[i%len(paramsSets)]
		c := jobkey.Computation{
			Tenant: pick(), DocumentSHA256: pick(), MediaType: pick(), Pipeline: pick(),
			PipelineVersion: []int32{0, 1, -7, 1 << 30}[rng.IntN(4)], PromptVersion: pick(), ModelProfile: pick(), Params: params,
		}
		want := mapKey(t, jobkey.DedupPrefix, map[string]any{
			"tenant": c.Tenant, "document_sha256": c.DocumentSHA256, "media_type": c.MediaType, "pipeline": c.Pipeline,
			"pipeline_version": c.PipelineVersion, "prompt_version": c.PromptVersion, "model_profile": c.ModelProfile,
			"params": orEmpty(params),
		})
		got, err := jobkey.DedupKey(c)
		require.NoError(t, err)
		require.Equal(t, want, got, "%+v", c)
		c.CanonicalParams, err = jobkey.Canonical(orEmpty(params))
		require.NoError(t, err)
		c.Params = map[string]any{"ignored": "when CanonicalParams is set"}
		got, err = jobkey.DedupKey(c)
		require.NoError(t, err)
		require.Equal(t, want, got, "with CanonicalParams: %+v", c)

		r := jobkey.Request{Pipeline: pick(), DocumentSHA256: pick(), MediaType: pick(), DocumentName: pick(), ModelProfile: pick(), Params: params}
		want = mapKey(t, jobkey.FingerprintPrefix, map[string]any{
			"pipeline": r.Pipeline, "document_sha256": r.DocumentSHA256, "media_type": r.MediaType,
			"document_name": r.DocumentName, "model_profile": r.ModelProfile, "params": orEmpty(params),
		})
		got, err = jobkey.Fingerprint(r)
		require.NoError(t, err)
		require.Equal(t, want, got, "%+v", r)
		r.CanonicalParams = c.CanonicalParams
		r.Params = nil
		got, err = jobkey.Fingerprint(r)
		require.NoError(t, err)
		require.Equal(t, want, got, "with CanonicalParams: %+v", r)
	}
	_, err := jobkey.DedupKey(jobkey.Computation{Params: map[string]any{"x": fmt.Errorf("no JSON")}})
	require.Error(t, err, "params without a canonical form")
}
