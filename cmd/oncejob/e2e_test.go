package main_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// binDir holds the oncejob and grpcurl binaries built once for this package.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "oncejob-e2e-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	for _, b := range [][2]string{
		{"oncejob", "github.com/oncejob/oncejob/cmd/oncejob"},
		{"grpcurl", "github.com/fullstorydev/grpcurl/cmd/grpcurl"},
		{"receiver", "github.com/oncejob/oncejob/examples/receiver"},
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b[0]), b[1])
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n", b[0], err)
			os.Exit(1)
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// serve starts the real binary on a fresh Postgres schema and returns its
// address once it is healthy. The process gets SIGTERM at cleanup and must
// exit cleanly.
func serve(t *testing.T, extraArgs ...string) string {
	t.Helper()
	addr := freeAddr(t)
	args := append([]string{"serve", "--database-url", storepgtest.NewSchemaURL(t), "--migrate", "--grpc-addr", addr}, extraArgs...)
	p := start(t, "serve", nil, args...)
	t.Cleanup(p.stop)
	waitHealthy(t, p, addr)
	require.Contains(t, p.logs.String(), "DEV MODE", "dev mode must be announced")
	return addr
}

// serveEmbedded starts the real binary as a new user would: no database,
// no provider, only a data directory (here a temp one).
func serveEmbedded(t *testing.T) string {
	t.Helper()
	addr := freeAddr(t)
	p := start(t, "serve-embedded", nil, "serve", "--data-dir", t.TempDir(), "--grpc-addr", addr)
	t.Cleanup(p.stop)
	waitHealthy(t, p, addr)
	require.Contains(t, p.logs.String(), "DEV MODE", "dev mode must be announced")
	require.Contains(t, p.logs.String(), "built-in LLM simulator")
	return addr
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// TestPythonGeneratedClient runs the pytest suite of the generated Python
// client against the real binary, under Debian's system python3.
func TestPythonGeneratedClient(t *testing.T) {
	requirePython(t)
	addr := serve(t)
	cmd := exec.Command(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "../../tests/python")
	cmd.Env = append(os.Environ(), "ONCEJOB_ADDR="+addr, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Regexp(t, `\d+ passed`, string(out))
	t.Logf("%s", out)
}
