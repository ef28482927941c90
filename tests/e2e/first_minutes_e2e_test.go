package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCLIWrongAddrSaysWhat: the first mistakes with --addr, on the real
// binary (issue 30, finding 8). Nothing listening: "cannot reach oncejob at
// ADDR: is 'oncejob serve' running? (--addr, ONCEJOB_ADDR)", from the flag
// and from ONCEJOB_ADDR alike, where it said "retry budget spent ...
// connection refused". The server's HTTP port: it says so and names the
// gRPC one, where it said "http2: frame too large". A URL: a usage error,
// exit 2, where it was retried.
func TestCLIWrongAddrSaysWhat(t *testing.T) {
	t.Parallel()
	nobody := freeAddr(t)
	for _, args := range [][]string{{"get", "some-job", "--addr", nobody}, {"run", "list", "--addr", nobody}, {"watch", "some-job", "--addr", nobody}} {
		_, stderr, code := runCLI(t, append(args, "--max-attempts", "2")...)
		require.Equal(t, 1, code, "%q: %s", args, stderr)
		require.Contains(t, stderr, "cannot reach oncejob at "+nobody+": is 'oncejob serve' running? (--addr, ONCEJOB_ADDR)", "%q", args)
		require.NotContains(t, stderr, "retry budget spent", "%q", args)
	}
	cmd := exec.Command(filepath.Join(binDir, "oncejob"), "list", "--max-attempts", "1")
	cmd.Env = append(os.Environ(), "ONCEJOB_ADDR="+nobody)
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "cannot reach oncejob at "+nobody+": is 'oncejob serve' running?")

	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	server := start(t, "serve", nil, embeddedServeArgs(t.TempDir(), grpcAddr, nil, "", "--http-addr", httpAddr)...)
	waitHealthy(t, server, grpcAddr)
	for _, args := range [][]string{{"list"}, {"watch", "some-job"}} {
		_, stderr, code := runCLI(t, append(args, "--addr", httpAddr)...)
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, httpAddr+" answers HTTP/1, not gRPC: that looks like oncejob's HTTP port (serve --http-addr); give --addr the gRPC port", "%q", args)
		require.NotContains(t, stderr, "frame too large")
		require.NotContains(t, stderr, "attempts", "not retried: no retry changes the answer")
	}
	for _, addr := range []string{"http://" + httpAddr, "https://" + grpcAddr, "HTTP://" + grpcAddr + ",127.0.0.1:1", "localhost"} {
		_, stderr, code := runCLI(t, "list", "--addr", addr)
		require.Equal(t, 2, code, "%s: a usage error: %s", addr, stderr)
		require.NotContains(t, stderr, "attempts", addr)
		if strings.Contains(addr, "://") {
			require.Contains(t, stderr, "give host:port, not a URL", addr)
		} else {
			require.Contains(t, stderr, "want host:port", addr)
		}
	}
	stdout, stderr, code := runCLI(t, "list", "--addr", grpcAddr)
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, "ID")
}
