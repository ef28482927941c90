package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// keysOn runs `oncejob keys args...` on a store (--database-url or
// --data-dir in storeArgs) and returns stdout, stderr and whether it
// succeeded.
func keysOn(t *testing.T, storeArgs []string, args ...string) (string, string, bool) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "oncejob"), append(append([]string{"keys", args[0]}, storeArgs...), args[1:]...)...)
	cmd.Env = os.Environ()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return strings.TrimSpace(stdout.String()), stderr.String(), err == nil
}

// anonymousList makes one ListJobs call without a key (with key, when not
// empty) and returns its error.
func anonymousList(t *testing.T, addr, key string) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
	}
	_, err = oncejobv1.NewJobServiceClient(conn).ListJobs(ctx, &oncejobv1.ListJobsRequest{})
	return err
}

// TestAuthFailsClosedWhileTheKeysCannotBeRead (issue #31, finding 1): a
// server started while api_keys is locked (ACCESS EXCLUSIVE, so even a
// read waits) does not serve in dev mode although the store holds a key:
// it serves nothing until it can read them, and then only with a key.
// Before the fix it gave up on the read after 500 ms and started in dev
// mode: the anonymous ListJobs below succeeded.
func TestAuthFailsClosedWhileTheKeysCannotBeRead(t *testing.T) {
	t.Parallel()
	url := storepgtest.NewMigratedSchemaURL(t)
	c0 := cli{t: t}
	_, errOut, code := c0.run("", "migrate", "--database-url", url)
	require.Zero(t, code, errOut)
	key, errOut, ok := keysOn(t, []string{"--database-url", url}, "create", "--tenant", "acme", "--role", "operator")
	require.True(t, ok, errOut)

	ctx := context.Background()
	lock, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer lock.Close(ctx)
	tx, err := lock.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)

	addr := freeAddr(t)
	p := start(t, "serve-locked-keys", nil, "serve", "--database-url", url, "--grpc-addr", addr, "--workers", "0")
	t.Cleanup(p.stop)
	// Either it says it waits for the keys (fixed) or it has started
	// (before the fix: in dev mode, after its 500 ms look).
	require.Eventually(t, func() bool {
		if p.done() {
			t.Fatalf("serve exited: %v\n%s", p.err, p.logs)
		}
		return strings.Contains(p.logs.String(), "cannot read the API keys") || strings.Contains(p.logs.String(), "oncejob serving")
	}, 30*time.Second, 10*time.Millisecond)
	require.NotContains(t, p.logs.String(), "DEV MODE", "keys exist: never dev mode")
	err = anonymousList(t, addr, "")
	require.Error(t, err, "an anonymous call while the keys cannot be read is refused")
	require.NotEqual(t, codes.OK, status.Code(err))

	require.NoError(t, tx.Rollback(ctx))
	waitHealthy(t, p, addr)
	require.NotContains(t, p.logs.String(), "DEV MODE")
	require.Equal(t, codes.Unauthenticated, status.Code(anonymousList(t, addr, "")))
	require.NoError(t, anonymousList(t, addr, key))
}

// TestAuthRevokingEveryKeyKeepsTheServerClosed (issue #31, finding 1), on
// both stores: a store that has held a key is never dev mode again, even
// with every key revoked, across a restart; `--auth dev` asks for dev mode
// there explicitly; tenant "default" cannot be given to a key. Before the
// fix the restarted server was in dev mode and `keys create --tenant
// default` was accepted.
func TestAuthRevokingEveryKeyKeepsTheServerClosed(t *testing.T) {
	t.Parallel()
	for name, storeArgs := range map[string]func(t *testing.T) []string{
		"postgres": func(t *testing.T) []string {
			url := storepgtest.NewMigratedSchemaURL(t)
			_, errOut, code := (cli{t: t}).run("", "migrate", "--database-url", url)
			require.Zero(t, code, errOut)
			return []string{"--database-url", url}
		},
		"embedded": func(t *testing.T) []string {
			// As a new user starts: a fresh data directory is dev mode.
			dir := t.TempDir()
			addr := freeAddr(t)
			p := start(t, "serve-fresh", nil, "serve", "--data-dir", dir, "--grpc-addr", addr, "--workers", "0")
			waitHealthy(t, p, addr)
			require.Contains(t, p.logs.String(), "DEV MODE: no --api-keys and this store has never held a key")
			require.NoError(t, anonymousList(t, addr, ""))
			p.stop()
			return []string{"--data-dir", dir}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := storeArgs(t)
			_, errOut, ok := keysOn(t, st, "create", "--tenant", "default")
			require.False(t, ok, "tenant default is reserved")
			require.Contains(t, errOut, "reserved for dev mode")
			_, errOut, ok = keysOn(t, st, "create", "--tenant", "Default")
			require.False(t, ok, "in any case")
			require.Contains(t, errOut, "reserved for dev mode")

			key, errOut, ok := keysOn(t, st, "create", "--tenant", "acme", "--role", "operator")
			require.True(t, ok, errOut)
			m := storeKeyRE.FindStringSubmatch(key)
			require.NotNil(t, m, key)
			_, errOut, ok = keysOn(t, st, "revoke", "ojk_"+m[1])
			require.True(t, ok, errOut)

			serveOn := func(extra ...string) (*proc, string) {
				addr := freeAddr(t)
				p := start(t, "serve-"+name, nil, append(append([]string{"serve", "--grpc-addr", addr, "--workers", "0"}, st...), extra...)...)
				waitHealthy(t, p, addr)
				return p, addr
			}
			p, addr := serveOn()
			require.NotContains(t, p.logs.String(), "DEV MODE", "every key revoked: still not dev mode")
			require.Contains(t, p.logs.String(), "authenticated mode")
			require.Equal(t, codes.Unauthenticated, status.Code(anonymousList(t, addr, "")))
			require.Equal(t, codes.Unauthenticated, status.Code(anonymousList(t, addr, key)), "revoked")
			p.stop()

			p, addr = serveOn("--auth", "dev")
			require.Contains(t, p.logs.String(), "DEV MODE (--auth dev)")
			require.NoError(t, anonymousList(t, addr, ""), "dev mode asked for")
			p.stop()
		})
	}
}

// TestKeysListEscapesNames (issue #31, finding 11): `keys create` refuses a
// name with control characters, and `keys list` prints a name that has
// them (written before names were checked, or by hand) quoted, so it
// cannot send escape sequences to the terminal or forge a row. Before,
// the name was printed raw.
func TestKeysListEscapesNames(t *testing.T) {
	t.Parallel()
	url := storepgtest.NewSchemaURL(t)
	_, errOut, code := (cli{t: t}).run("", "migrate", "--database-url", url)
	require.Zero(t, code, errOut)
	st := []string{"--database-url", url}
	hostile := "\x1b]0;owned\x07\x1b[2J\nojk_aaaaaaaaaaaa  acme  operator\u202e"
	_, errOut, ok := keysOn(t, st, "create", "--tenant", "acme", "--name", hostile)
	require.False(t, ok, "a name with control characters is refused")
	require.Contains(t, errOut, "printable")

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `INSERT INTO api_keys (id, tenant, role, name, sha256) VALUES ('bbbbbbbbbbbb', 'acme', 'submitter', $1, $2)`,
		hostile, strings.Repeat("0", 64))
	require.NoError(t, err)
	list, errOut, ok := keysOn(t, st, "list")
	require.True(t, ok, errOut)
	require.NotContains(t, list, "\x1b", "no escape sequence reaches the terminal")
	require.NotContains(t, list, "\u202e")
	require.Equal(t, 2, strings.Count(list, "\n")+1, "a header and one row: %q", list)
	require.Contains(t, list, `"\x1b]0;owned\a\x1b[2J\nojk_aaaaaaaaaaaa  acme  operator\u202e"`)
}
