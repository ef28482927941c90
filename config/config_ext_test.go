package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/config"
)

// TestParseFlattensSections: keys are flag names; sections join their
// names with dashes, underscores read as dashes, a list is its
// comma-separated values, an empty value is empty; sinks are their own
// section.
func TestParseFlattensSections(t *testing.T) {
	t.Parallel()
	f, err := config.Parse([]byte(`
workers: 4
log_level: warn
grpc:
  addr: 0.0.0.0:7070
  keepalive:
    min-time: 20s
pipelines: [a.yaml, b.yaml]
api-keys:
sinks:
  - name: billing
    tenant: acme
    events: [job.succeeded]
    webhook: {url: "https://example.com/in", secret: {env: WHSEC}}
    retry: {max_attempts: 3, initial_backoff: 2s, multiplier: 3, max_age: 1h}
`))
	require.NoError(t, err)
	require.Equal(t, []config.Setting{
		{Name: "workers", Value: "4", Line: 2},
		{Name: "log-level", Value: "warn", Line: 3},
		{Name: "grpc-addr", Value: "0.0.0.0:7070", Line: 5},
		{Name: "grpc-keepalive-min-time", Value: "20s", Line: 7},
		{Name: "pipelines", Value: "a.yaml,b.yaml", Line: 8},
		{Name: "api-keys", Value: "", Line: 9},
	}, f.Settings)
	require.Len(t, f.Sinks, 1)
	require.Equal(t, "WHSEC", f.Sinks[0].Webhook.Secret.Env)
	retry := f.Sinks[0].Retry
	require.Equal(t, 3, retry.MaxAttempts, "the shared retry fields sit inline in a sink's retry block")
	require.Equal(t, 2*time.Second, retry.InitialBackoff)
	require.InDelta(t, 3.0, retry.Multiplier, 0)
	require.Equal(t, time.Hour, retry.MaxAge)
}

// TestParseRefuses: a key set twice (by two spellings too), a list of
// sections, a document that is not a mapping, an unknown sink field and an
// invalid sink are refused, naming what and where.
func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		"workers: 1\nworkers: 2\n":              `line 2: "workers" is set twice (first on line 1)`,
		"grpc-addr: a\ngrpc:\n  addr: b\n":      `"grpc-addr" is set twice`,
		"pipelines:\n  - {name: x}\n":           "a list holds plain values only",
		"- workers\n":                           "want a mapping",
		"sinks:\n  - name: a\n    tenantt: t\n": "field tenantt not found",
		"sinks:\n  - name: a\n    tenant: t\n":  "config:",
		"sinks:\n  - name: a\n    tenant: t\n    events: [job.failed]\n    webhook: {url: \"https://example.com/c\", secret: {env: W}}\n    retry: {multiplier: 0.5}\n": "retry.multiplier must be at least 1",
	} {
		_, err := config.Parse([]byte(doc))
		require.ErrorContains(t, err, want, doc)
	}
	f, err := config.Parse(nil)
	require.NoError(t, err)
	require.Empty(t, f.Settings)
}
