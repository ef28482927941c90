package pipeline_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/pipeline"
)

const batchProfiles = `
model_profiles:
  online: {model: m, prompt_micros_per_1k: 1000, completion_micros_per_1k: 3000}
  nightly: {model: m, prompt_micros_per_1k: 1000, completion_micros_per_1k: 3000,
            provider_batch: {max_calls: 200, linger: 250ms, price_percent: 40}}
  defaults: {model: m, prompt_micros_per_1k: 1000, completion_micros_per_1k: 3000, provider_batch: {}}
`

func TestProviderBatchProfile(t *testing.T) {
	t.Parallel()
	r, err := pipeline.Parse([]byte(batchProfiles))
	require.NoError(t, err)
	require.Equal(t, []string{"defaults", "nightly"}, r.BatchProfiles())

	nightly, _ := r.Profile("nightly")
	require.Equal(t, pipeline.ProviderBatch{MaxCalls: 200, MaxBytes: 100 << 20, Linger: 250 * time.Millisecond, PricePercent: 40}, nightly.ProviderBatch.WithDefaults())
	require.EqualValues(t, 5000, nightly.CostMicros(2000, 1000))
	require.EqualValues(t, 2000, nightly.BatchCostMicros(2000, 1000))

	defaults, _ := r.Profile("defaults")
	require.Equal(t, pipeline.ProviderBatch{MaxCalls: 1000, MaxBytes: 100 << 20, Linger: time.Second, PricePercent: 50}, defaults.ProviderBatch.WithDefaults())
	require.EqualValues(t, 2500, defaults.BatchCostMicros(2000, 1000))

	online, _ := r.Profile("online")
	require.Nil(t, online.ProviderBatch)
	require.Empty(t, (*pipeline.Registry)(nil).BatchProfiles())
}

func TestProviderBatchProfileRefusesBadBounds(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		`{max_calls: -1}`, `{max_calls: 50001}`, `{linger: -1s}`, `{price_percent: 101}`, `{price_percent: -5}`, `{max_bytes: -1}`, `{max_bytes: 200000001}`, `{max_bites: 10}`,
	} {
		_, err := pipeline.Parse([]byte("model_profiles:\n  p: {model: m, provider_batch: " + bad + "}\n"))
		require.Error(t, err, bad)
	}
}

func TestBatchTwin(t *testing.T) {
	t.Parallel()
	r, err := pipeline.Parse([]byte(batchProfiles + `
pipelines:
  - name: p
    version: 1
    prompt: {version: "1", template: "x"}
    model_profiles: [online, nightly]
    output_schema: {type: object}
`))
	require.NoError(t, err)

	// An online profile's twin is the profile with a default provider batch;
	// a profile with a provider batch is its own.
	require.Equal(t, "online@batch", r.BatchTwin("online"))
	require.Equal(t, "nightly", r.BatchTwin("nightly"))
	twin, ok := r.Profile("online@batch")
	require.True(t, ok)
	require.Equal(t, "m", twin.Model)
	require.EqualValues(t, 1000, twin.PromptMicrosPer1K)
	require.NotNil(t, twin.ProviderBatch)
	require.Equal(t, pipeline.ProviderBatch{MaxCalls: 1000, MaxBytes: 100 << 20, Linger: time.Second, PricePercent: 50}, twin.ProviderBatch.WithDefaults())
	online, _ := r.Profile("online")
	require.Nil(t, online.ProviderBatch, "the twin is a copy")
	_, ok = r.Profile("missing@batch")
	require.False(t, ok)
	require.Equal(t, []string{"defaults", "nightly"}, r.BatchProfiles(), "twins are not configured batch profiles")

	p, _ := r.Get("p")
	require.True(t, p.AllowsModelProfile("online@batch"))
	require.True(t, p.AllowsModelProfile("nightly"))
	require.False(t, p.AllowsModelProfile("defaults@batch"), "the pipeline does not allow defaults")
	require.False(t, p.AllowsModelProfile("online@other"))
}
