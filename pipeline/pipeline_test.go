package pipeline_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/pipeline"
)

func TestBuiltinSummarize(t *testing.T) {
	t.Parallel()
	p, ok := pipeline.Builtin().Get("summarize")
	require.True(t, ok)
	require.EqualValues(t, 1, p.Version)
	require.Equal(t, "default", p.DefaultModelProfile())
	require.Equal(t, 5, p.Retry.MaxAttempts)
	require.Equal(t, time.Hour, p.Retry.Deadline)
}

func TestLoadMergesAndValidates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
model_profiles:
  small: {model: tiny-1, prompt_micros_per_1k: 10, completion_micros_per_1k: 20}
  large: {model: huge-1}
pipelines:
  - name: classify
    version: 3
    prompt: {version: "7", template: "Classify {{.Text}}"}
    model_profiles: [small, large]
    output_schema: {type: object}
`), 0o600))
	r, err := pipeline.Load(path)
	require.NoError(t, err)
	require.Equal(t, []string{"classify", "summarize"}, r.Names())
	p, _ := r.Get("classify")
	require.True(t, p.AllowsModelProfile("large"))
	require.False(t, p.AllowsModelProfile("huge"))
	require.Equal(t, 5, p.Retry.MaxAttempts, "defaults applied")
	require.Equal(t, "retry", p.OnUnknown)
	small, ok := r.Profile("small")
	require.True(t, ok)
	require.EqualValues(t, 30, small.CostMicros(1000, 1000))
	_, ok = r.Profile("default")
	require.True(t, ok, "built-in profiles stay")

	require.NoError(t, os.WriteFile(path, []byte(`
pipelines:
  - name: classify
    version: 1
    prompt: {version: "1", template: "x"}
    model_profiles: [missing]
    output_schema: {type: object}
`), 0o600))
	_, err = pipeline.Load(path)
	require.ErrorContains(t, err, `model profile "missing" is not defined`)

	require.NoError(t, os.WriteFile(path, []byte(`
pipelines:
  - name: Bad Name
    version: 0
    prompt: {version: "", template: ""}
    model_profiles: []
`), 0o600))
	_, err = pipeline.Load(path)
	require.ErrorContains(t, err, "name must match")
	require.ErrorContains(t, err, "version must be >= 1")
	require.ErrorContains(t, err, "model_profiles")

	require.NoError(t, os.WriteFile(path, []byte("pipelines:\n  - nme: typo\n"), 0o600))
	_, err = pipeline.Load(path)
	require.ErrorContains(t, err, "nme")
}

func TestProviderLimits(t *testing.T) {
	t.Parallel()
	const base = `
provider_limits:
  openai-main: {requests_per_minute: 1200, tokens_per_minute: 60000}
tenant_weights: {acme: 4, small: 0.5}
model_profiles:
  fast: {model: m1, shared_limit: openai-main}
  smart: {model: m2, shared_limit: openai-main}
  local: {model: m3, limits: {calls_in_flight: 4}}
  free: {model: m4}
`
	r, err := pipeline.Parse([]byte(base))
	require.NoError(t, err)
	require.Equal(t, "openai-main", r.LimitOf("fast"))
	require.Equal(t, "openai-main", r.LimitOf("smart@batch"))
	require.Equal(t, "local", r.LimitOf("local"))
	require.Equal(t, map[string]pipeline.ProviderLimit{
		"openai-main": {Limits: pipeline.Limits{RequestsPerMinute: 1200, TokensPerMinute: 60000}, Profiles: []string{"fast", "smart"}},
		"local":       {Limits: pipeline.Limits{CallsInFlight: 4}, Profiles: []string{"local"}},
		"free":        {Profiles: []string{"free"}},
	}, r.ProviderLimits())
	require.Equal(t, map[string]float64{"acme": 4, "small": 0.5}, r.TenantWeights())

	for _, bad := range []string{
		"model_profiles: {a: {model: m, limits: {requests_per_minute: -1}}}",
		"model_profiles: {a: {model: m, limits: {calls_in_flight: -2}}}",
		"model_profiles: {a: {model: m, limits: {tokens_per_minute: 1e13}}}",
		"model_profiles: {a: {model: m, shared_limit: nowhere}}",
		"provider_limits: {x: {requests_per_minute: 1}}\nmodel_profiles: {a: {model: m, shared_limit: x, limits: {calls_in_flight: 1}}}",
		"provider_limits: {a: {requests_per_minute: 1}}\nmodel_profiles: {a: {model: m}}",
		"provider_limits: {x: {requests_per_minute: -1}}",
		"provider_limits: {x: {rpm: 1}}",
		"provider_limits: {'Bad Name': {}}",
		"tenant_weights: {acme: 0}",
		"tenant_weights: {acme: -1}",
		"tenant_weights: {acme: 1001}",
		"tenant_weights: {'': 1}",
		"tenant_weights: {acme: heavy}",
	} {
		_, err := pipeline.Parse([]byte(bad))
		require.Error(t, err, bad)
	}
}

// TestRetryPolicyFields: the retry block keeps its YAML shape, the shared
// attempts-and-backoff fields (retry.Policy, inlined) beside the engine's
// own deadline and token budget; an unknown field is still refused, and a
// multiplier that would shrink the backoff is refused with the reason.
func TestRetryPolicyFields(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "p.yaml")
	write := func(retry string) (*pipeline.Registry, error) {
		require.NoError(t, os.WriteFile(path, []byte(`
pipelines:
  - name: classify
    version: 1
    prompt: {version: "1", template: "x"}
    model_profiles: [default]
    output_schema: {type: object}
    retry: `+retry+"\n"), 0o600))
		return pipeline.Load(path)
	}
	r, err := write("{max_attempts: 7, initial_backoff: 2s, max_backoff: 3m, multiplier: 1.5, deadline: 2h, max_cost_tokens: 9}")
	require.NoError(t, err)
	p, _ := r.Get("classify")
	require.Equal(t, 7, p.Retry.MaxAttempts)
	require.Equal(t, 2*time.Second, p.Retry.InitialBackoff)
	require.Equal(t, 3*time.Minute, p.Retry.MaxBackoff)
	require.InDelta(t, 1.5, p.Retry.Multiplier, 0)
	require.Equal(t, 2*time.Hour, p.Retry.Deadline)
	require.EqualValues(t, 9, p.Retry.MaxCostTokens)

	r, err = write("{}")
	require.NoError(t, err)
	p, _ = r.Get("classify")
	require.Equal(t, 5, p.Retry.MaxAttempts)
	require.Equal(t, time.Second, p.Retry.InitialBackoff)
	require.Equal(t, time.Minute, p.Retry.MaxBackoff)
	require.InDelta(t, 2.0, p.Retry.Multiplier, 0)

	_, err = write("{max_atempts: 3}")
	require.ErrorContains(t, err, "max_atempts")
	_, err = write("{multiplier: 0.5}")
	require.ErrorContains(t, err, "retry.multiplier must be at least 1")
}
