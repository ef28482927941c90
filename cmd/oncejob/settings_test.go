package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/oncejob/oncejob/config"
	"github.com/oncejob/oncejob/internal/testcert"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "oncejob.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

func flagValue(t *testing.T, fs *flag.FlagSet, name string) string {
	t.Helper()
	f := fs.Lookup(name)
	require.NotNil(t, f, name)
	return f.Value.String()
}

// TestSettingsPrecedence: a flag on the command line wins over its
// ONCEJOB_* variable, which wins over the config file, which wins over the
// default; sections nest (tls: cert: is --tls-cert), underscores read as
// dashes, lists are comma-separated; ONCEJOB_CONFIG names the file when
// --config does not.
func TestSettingsPrecedence(t *testing.T) {
	path := writeConfig(t, `
grpc-addr: 127.0.0.1:1001      # overridden by the variable and the flag
workers: 2                     # overridden by the variable
log_level: warn                # the file's
tls:
  cert: /etc/oncejob/tls.crt
grpc:
  keepalive:
    min-time: 20s
pipelines: [a.yaml]
`)
	t.Setenv("ONCEJOB_GRPC_ADDR", "127.0.0.1:1002")
	t.Setenv("ONCEJOB_WORKERS", "5")
	fs, err := commandFlags(runServe)
	require.NoError(t, err)
	require.NoError(t, parseFlags(fs, []string{"--config", path, "--grpc-addr", "127.0.0.1:1003"}))
	require.Equal(t, "127.0.0.1:1003", flagValue(t, fs, "grpc-addr"), "flag > env > file")
	require.Equal(t, "5", flagValue(t, fs, "workers"), "env > file")
	require.Equal(t, "warn", flagValue(t, fs, "log-level"), "file > default")
	require.Equal(t, "/etc/oncejob/tls.crt", flagValue(t, fs, "tls-cert"))
	require.Equal(t, "20s", flagValue(t, fs, "grpc-keepalive-min-time"))
	require.Equal(t, "a.yaml", flagValue(t, fs, "pipelines"))
	require.Equal(t, "128", flagValue(t, fs, "submit-max-batch"), "the default")

	// ONCEJOB_CONFIG names the file; worker takes the keys it has.
	t.Setenv("ONCEJOB_CONFIG", path)
	wfs, err := commandFlags(runWorker)
	require.NoError(t, err)
	require.NoError(t, parseFlags(wfs, nil))
	require.Equal(t, "warn", flagValue(t, wfs, "log-level"))
	require.Equal(t, "5", flagValue(t, wfs, "workers"))
	require.Nil(t, wfs.Lookup("grpc-addr"), "serve's flag, ignored by worker")
}

// TestSettingsUnknownKey: a key that is no flag of serve, worker or relay
// is refused by each of them and by config check, naming the key and its
// line; so is a value its flag does not take. A key of another command is
// accepted (relays: in worker's file).
func TestSettingsUnknownKey(t *testing.T) {
	bad := writeConfig(t, "workers: 2\ntls:\n  certificate: /x\n")
	for _, c := range configCommands() {
		fs, err := commandFlags(c.run)
		require.NoError(t, err)
		err = parseFlags(fs, []string{"--config", bad})
		require.ErrorContains(t, err, `line 3: unknown key "tls-certificate"`, c.name)
	}
	_, err := effectiveConfig(bad)
	require.ErrorContains(t, err, `unknown key "tls-certificate"`)

	_, err = effectiveConfig(writeConfig(t, "config: other.yaml\n"))
	require.ErrorContains(t, err, `unknown key "config"`)
	_, err = effectiveConfig(writeConfig(t, "workers: many\n"))
	require.ErrorContains(t, err, `line 1: workers: invalid value "many"`)
	_, err = effectiveConfig(writeConfig(t, "workers: 1\nworkers: 2\n"))
	require.ErrorContains(t, err, "set twice")
	_, err = effectiveConfig(writeConfig(t, "sinks:\n  - name: a\n    tenant: t\n    events: [job.succeeded]\n    webhook: {url: 'https://x', secrett: {env: X}}\n"))
	require.ErrorContains(t, err, "secrett")

	fs, err := commandFlags(runWorker)
	require.NoError(t, err)
	require.NoError(t, parseFlags(fs, []string{"--config", writeConfig(t, "relays: 3\nworkers: 4\n")}))
	require.Equal(t, "4", flagValue(t, fs, "workers"))
}

// TestConfigCheckMasksSecrets: the effective configuration shows every
// flag with its source, and no secret: flags named as keys, secrets,
// passwords or tokens are masked, and so are URL passwords (in the user
// information or the query) in any flag and in the sinks; sink secrets
// show as the references the file holds. The output is itself a config
// file that parses.
func TestConfigCheckMasksSecrets(t *testing.T) {
	path := writeConfig(t, `
database-url: postgres://oncejob:pg-pass-1@db:5432/oncejob?sslmode=require&password=pg-pass-2
api-keys: /etc/oncejob/keys.yaml
llm:
  api_key: sk-live-123
  base-url: https://api.example.com/v1
sinks:
  - name: billing
    tenant: acme
    events: [job.succeeded]
    webhook:
      url: https://hook:hook-pass@hooks.example.com/in?token=hook-token
      secret: {env: BILLING_WHSEC}
`)
	t.Setenv("ONCEJOB_LLM_API_KEY", "sk-env-456")
	t.Setenv("ONCEJOB_RELAYS", "2")
	eff, err := effectiveConfig(path)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, eff.write(&out))
	text := out.String()
	t.Log(text)
	for _, secret := range []string{"pg-pass-1", "pg-pass-2", "keys.yaml", "sk-live-123", "sk-env-456", "hook-pass", "hook-token"} {
		require.NotContains(t, text, secret)
	}
	require.Contains(t, text, "database-url: postgres://oncejob:****@db:5432/oncejob?password=****&sslmode=require # file")
	require.Contains(t, text, "llm-api-key: '****' # env ONCEJOB_LLM_API_KEY; serve, worker only")
	require.Contains(t, text, "llm-base-url: https://api.example.com/v1 # file")
	require.Contains(t, text, "relays: 2 # env ONCEJOB_RELAYS; serve, relay only")
	require.Contains(t, text, "workers: ")
	require.Contains(t, text, "url: https://hook:****@hooks.example.com/in?token=****")
	require.Contains(t, text, "env: BILLING_WHSEC")

	var back map[string]any
	require.NoError(t, yaml.Unmarshal(out.Bytes(), &back))
	require.Contains(t, back, "tls-cert")
	require.Contains(t, back, "sinks")
}

// TestOperationsConfigExample: the config file of docs/operations.md is
// one that serve, worker and relay take.
func TestOperationsConfigExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "<!-- e2e: config example -->\n```yaml\n")
	require.True(t, ok, "the marked example")
	example, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	file, err := config.Parse([]byte(example))
	require.NoError(t, err)
	require.Len(t, file.Sinks, 1)
	for _, c := range configCommands() {
		fs, err := commandFlags(c.run)
		require.NoError(t, err)
		_, err = applyFile(fs, file)
		require.NoError(t, err, c.name)
	}
	fs, err := commandFlags(runServe)
	require.NoError(t, err)
	_, err = applyFile(fs, file)
	require.NoError(t, err)
	require.Equal(t, "0.0.0.0:7071", flagValue(t, fs, "http-addr"))
	require.Equal(t, "/etc/oncejob/tls/clients.pem", flagValue(t, fs, "tls-client-ca"))
}

// TestConfigCheckLoadsTLSFiles: config check loads the TLS files as serve
// would at start: a key that is not the certificate's, or a certificate
// without a key, is refused.
func TestConfigCheckLoadsTLSFiles(t *testing.T) {
	ca := testcert.NewCA(t, "CA")
	a, b := ca.Server(t, "a"), ca.Server(t, "b")
	_, err := effectiveConfig(writeConfig(t, "tls:\n  cert: "+a.CertFile+"\n  key: "+a.KeyFile+"\n  client-ca: "+ca.CertFile+"\n"))
	require.NoError(t, err)
	_, err = effectiveConfig(writeConfig(t, "tls:\n  cert: "+a.CertFile+"\n  key: "+b.KeyFile+"\n"))
	require.ErrorContains(t, err, a.CertFile)
	_, err = effectiveConfig(writeConfig(t, "tls-cert: "+a.CertFile+"\n"))
	require.ErrorContains(t, err, "needs both --tls-cert and --tls-key")
}
