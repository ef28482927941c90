package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/oncejob/oncejob/config"
	"github.com/oncejob/oncejob/server/limits"
)

// TestLimitsFromTheConfigFile: the --limit-* flags and the limits: section
// from one file reach serve's limits, a tenant's 0 meaning no limit; config
// check prints the section as written; a bad section is refused naming it.
func TestLimitsFromTheConfigFile(t *testing.T) {
	path := writeConfig(t, `
limit:
  submit_rate: 5
  jobs_in_flight: 100
limits:
  tenants:
    acme:
      submit_rate: 50
      jobs_in_flight: 0
`)
	file, err := config.Load(path)
	require.NoError(t, err)
	fs, err := commandFlags(runServe)
	require.NoError(t, err)
	_, err = applyFile(fs, file)
	require.NoError(t, err)
	require.Equal(t, "5", flagValue(t, fs, "limit-submit-rate"))

	flags := &limits.Tenant{SubmitRate: 5, JobsInFlight: 100}
	lim, err := newLimits(flags, file, limits.AnyUsage, 16, nil)
	require.NoError(t, err)
	require.Equal(t, limits.Tenant{SubmitRate: 5, JobsInFlight: 100}, lim.For("globex"))
	require.Equal(t, limits.Tenant{SubmitRate: 50}, lim.For("acme"))

	eff, err := effectiveConfig(path)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, eff.write(&out))
	t.Log(out.String())
	require.Contains(t, out.String(), "limit-submit-rate: 5 # file")
	var back struct {
		Limits limits.Section `yaml:"limits"`
	}
	require.NoError(t, yaml.Unmarshal(out.Bytes(), &back))
	require.NotNil(t, back.Limits.Tenants["acme"].JobsInFlight, "an override's 0 is kept: it means no limit")
	require.Zero(t, *back.Limits.Tenants["acme"].JobsInFlight)

	_, err = config.Parse([]byte("limits:\n  tenants:\n    acme:\n      submit_rate: -1\n"))
	require.ErrorContains(t, err, "acme: submit_rate must be")
	_, err = config.Parse([]byte("limits:\n  tenants:\n    acme:\n      submit_rates: 1\n"))
	require.ErrorContains(t, err, "submit_rates")
}

// TestConfigCheckPrintsProviderLimitsAndTenantWeights: config check prints
// the pipelines file's provider limits, with the profiles drawing from
// each, and its tenant weights.
func TestConfigCheckPrintsProviderLimitsAndTenantWeights(t *testing.T) {
	pipes := writeConfig(t, `
provider_limits:
  openai-main: {requests_per_minute: 1200}
tenant_weights: {acme: 4}
model_profiles:
  fast: {model: m1, shared_limit: openai-main}
`)
	eff, err := effectiveConfig(writeConfig(t, "pipelines: "+pipes+"\n"))
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, eff.write(&out))
	var back struct {
		ProviderLimits map[string]struct {
			RequestsPerMinute float64  `yaml:"requests_per_minute"`
			Profiles          []string `yaml:"profiles"`
		} `yaml:"provider_limits"`
		TenantWeights map[string]float64 `yaml:"tenant_weights"`
	}
	require.NoError(t, yaml.Unmarshal(out.Bytes(), &back), out.String())
	require.EqualValues(t, 1200, back.ProviderLimits["openai-main"].RequestsPerMinute)
	require.Equal(t, []string{"fast"}, back.ProviderLimits["openai-main"].Profiles)
	require.Equal(t, map[string]float64{"acme": 4}, back.TenantWeights)
}
