package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

var storeKeyRE = regexp.MustCompile(`^ojk_([a-z2-7]{12})_[a-z2-7]+$`)

// TestKeysCLI: `oncejob keys create` prints a key once; a server on that
// Postgres leaves dev mode because the store holds keys; the submitter key
// submits but cannot cancel (PERMISSION_DENIED, exit 1); the operator key
// cancels; `keys list` shows prefixes and never secrets; `keys revoke`
// locks the key out of the running server within 5s, no restart.
func TestKeysCLI(t *testing.T) {
	t.Parallel()
	url := storepgtest.NewMigratedSchemaURL(t)
	keys := func(args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(binDir, "oncejob"), append([]string{"keys"}, args...)...)
		cmd.Env = append(os.Environ(), "ONCEJOB_DATABASE_URL="+url)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "keys %v: %s", args, stderr.String())
		return strings.TrimSpace(stdout.String()), stderr.String()
	}
	c0 := cli{t: t}
	_, errOut, code := c0.run("", "migrate", "--database-url", url)
	require.Zero(t, code, errOut)

	submitter, note := keys("create", "--tenant", "acme", "--role", "submitter", "--name", "ci")
	m := storeKeyRE.FindStringSubmatch(submitter)
	require.NotNil(t, m, "a key on stdout, alone: %q", submitter)
	require.Contains(t, note, "ojk_"+m[1])
	require.Contains(t, note, "shown once")
	operator, _ := keys("create", "--tenant", "acme", "--role", "operator")
	require.Regexp(t, storeKeyRE, operator)

	list, _ := keys("list")
	require.Contains(t, list, "ojk_"+m[1])
	require.Contains(t, list, "submitter")
	require.Contains(t, list, "ci")
	require.NotContains(t, list, submitter, "a secret is shown once, at create")
	require.NotContains(t, list, operator)

	addr := freeAddr(t)
	// No workers: the job stays QUEUED, so the operator's cancel applies.
	p := start(t, "serve-keys", nil, "serve", "--database-url", url, "--grpc-addr", addr, "--workers", "0")
	t.Cleanup(p.stop)
	waitHealthy(t, p, addr)
	require.NotContains(t, p.logs.String(), "DEV MODE", "the store's keys end dev mode")

	c := cli{t: t, addr: addr}
	doc := writeFile(t, "invoice.txt", "Invoice 7: 2 chairs.")
	out, errOut, code := c.run("", "submit", doc, "--api-key", submitter)
	require.Zero(t, code, errOut)
	id := jobIDRE.FindStringSubmatch(out + errOut)
	require.NotNil(t, id, out+errOut)

	_, errOut, code = c.run("", "cancel", id[1], "--api-key", submitter)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "PermissionDenied")
	_, errOut, code = c.run("", "cancel", id[1], "--api-key", operator)
	require.Zero(t, code, errOut)

	_, errOut, code = c.run("", "get", id[1])
	require.Equal(t, 1, code, "no key: refused")
	require.Contains(t, errOut, "Unauthenticated")

	revoked, _ := keys("revoke", "ojk_"+m[1])
	require.Contains(t, revoked, "revoked ojk_"+m[1])
	require.Eventually(t, func() bool {
		_, errOut, code := c.run("", "get", id[1], "--api-key", submitter)
		return code == 1 && strings.Contains(errOut, "Unauthenticated")
	}, 60*time.Second, 100*time.Millisecond, "a revoked key is refused by the running server")
	_, errOut, code = c.run("", "get", id[1], "--api-key", operator)
	require.Zero(t, code, errOut)
	list, _ = keys("list", "--all")
	require.Regexp(t, `ojk_`+m[1]+`\s+acme\s+submitter\s+\S+\s+\S+\s+20\d\d-`, list, "revoked keys listed with --all, with when")
}
