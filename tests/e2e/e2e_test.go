package e2e

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// binDir holds the binaries built once for this package: oncejob, grpcurl
// and the example receiver.
var binDir string

// parallel is the default of -test.parallel here: how many of the
// package's tests run at once. Nearly every test is t.Parallel (each on its
// own ports, temp dirs, Postgres schema or throwaway cluster, NATS stream
// and browser), and they spend most of their time waiting on the processes
// they drive — leases to expire, kills to land, jobs to finish — not on the
// CPU, so more of them than go test's default (GOMAXPROCS) fit a small
// machine: at 8 on the 2-core machine the package used 0.8 of a core
// (182 CPU-s in 238 s, the longest test 75 s), at 4 under half of one
// (docs/performance.md, "The test suite's time"). An explicit -parallel
// wins.
const parallel = 8

// big runs the tests that take a size at the size their issues showed
// them at (a run of 10,000 items through kills, two relays over 10,000
// events); by default they run at a fifth of it, where what they check
// holds the same (docs/performance.md, "The test suite's time"):
//
//	go test ./tests/e2e -run 'TestRunItemsThroughKills|TestTwoRelaysDeliverEveryEvent' -e2e.big
var big = flag.Bool("e2e.big", false, "run the sized tests at their issues' sizes (10,000 items, 10,000 events)")

// sized is small, or large under -e2e.big.
func sized(small, large int) int {
	if *big {
		return large
	}
	return small
}

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(max(parallel, runtime.GOMAXPROCS(0)))); err != nil {
			panic(err)
		}
	}
	dir, err := os.MkdirTemp("", "oncejob-e2e-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	// One go build for the three, named after their packages. Without
	// -race, whatever go test was given: the race detector checks the
	// test process here (the harness, its clients and proxies); the
	// server's code runs under -race in its own packages' tests, in
	// process. A race-built oncejob would cost every process the suite
	// starts several times the CPU, and the kill, failover and batch tests
	// rely on their processes making progress between kills.
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"github.com/oncejob/oncejob/cmd/oncejob",
		"github.com/fullstorydev/grpcurl/cmd/grpcurl",
		"github.com/oncejob/oncejob/examples/receiver")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "build oncejob, grpcurl and receiver: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	// goleak.VerifyTestMain's check, after the binaries are removed.
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

// serve starts the real binary on a migrated Postgres schema of its own
// (storepgtest.NewMigratedSchemaURL) and returns its
// address once it is healthy. The process gets SIGTERM at cleanup and must
// exit cleanly.
func serve(t *testing.T, extraArgs ...string) string {
	t.Helper()
	addr := freeAddr(t)
	args := append([]string{"serve", "--database-url", storepgtest.NewMigratedSchemaURL(t), "--migrate", "--grpc-addr", addr}, extraArgs...)
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
	t.Parallel()
	requirePython(t)
	addr := serve(t)
	cmd := exec.Command(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "../../tests/python")
	cmd.Env = append(os.Environ(), "ONCEJOB_ADDR="+addr, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Regexp(t, `\d+ passed`, string(out))
	t.Logf("%s", out)
}
