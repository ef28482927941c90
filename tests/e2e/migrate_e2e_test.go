package e2e

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/migrations"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// requireExitsNaming waits for p to exit, and requires exit status 1 and
// every string of want in its output.
func requireExitsNaming(t *testing.T, p *proc, want ...string) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s kept running against the wrong schema", p.name)
	}
	var exit *exec.ExitError
	require.True(t, errors.As(p.err, &exit), "%s must fail: %v\n%s", p.name, p.err, p.logs)
	require.Equal(t, 1, exit.ExitCode(), "%s", p.logs)
	for _, w := range want {
		require.Contains(t, p.logs.String(), w)
	}
}

// TestStartAgainstAnotherSchemaExits starts the real binary's serve and
// worker against a database one migration behind: each exits at once,
// naming the missing migration, and runs once --migrate has applied it;
// against a database a newer binary migrated, each exits naming the
// version it does not know.
func TestStartAgainstAnotherSchemaExits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storepgtest.NewSchemaURL(t)
	all, err := migrations.Postgres()
	require.NoError(t, err)
	st, err := storepg.Open(ctx, url)
	require.NoError(t, err)
	defer st.Close()
	_, err = migrations.Run(ctx, st, all[:len(all)-1])
	require.NoError(t, err)
	missing := all[len(all)-1].Name

	requireExitsNaming(t, start(t, "serve-behind", nil, "serve", "--database-url", url, "--grpc-addr", freeAddr(t)),
		"schema is behind this binary", missing, "--migrate")
	requireExitsNaming(t, start(t, "worker-behind", nil, "worker", "--database-url", url),
		"schema is behind this binary", missing)

	addr := freeAddr(t)
	p := start(t, "serve-migrate", nil, "serve", "--database-url", url, "--migrate", "--grpc-addr", addr)
	waitHealthy(t, p, addr)
	p.stop()
	w := start(t, "worker-current", nil, "worker", "--database-url", url, "--workers", "1")
	require.Eventually(t, func() bool {
		require.False(t, w.done(), "%s exited: %v\n%s", w.name, w.err, w.logs)
		return strings.Contains(w.logs.String(), "workers running")
	}, 30*time.Second, 10*time.Millisecond)
	w.stop()

	// A newer binary's migration: this one must not run on that schema.
	_, err = st.Pool().Exec(ctx, `INSERT INTO schema_migrations (version) VALUES (9999)`)
	require.NoError(t, err)
	requireExitsNaming(t, start(t, "serve-ahead", nil, "serve", "--database-url", url, "--migrate", "--grpc-addr", freeAddr(t)),
		"schema is ahead of this binary", "9999")
	requireExitsNaming(t, start(t, "worker-ahead", nil, "worker", "--database-url", url),
		"schema is ahead of this binary", "9999")
}
