package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/oncejob/oncejob/llm/llmsim"
)

// proc is a real oncejob process started by a test.
type proc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	logs   *syncBuffer
	exited chan struct{}
	err    error
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs the oncejob binary with args and extra environment. The
// process is killed at cleanup if still running. A serve process's HTTP
// face listens on an ephemeral port unless args say otherwise (a flag wins
// over the environment), so concurrent servers never collide on 7071.
func start(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	return startBinary(t, name, env, "oncejob", args...)
}

// startBinary is start for another binary built by TestMain.
func startBinary(t *testing.T, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	return startCommand(t, name, env, filepath.Join(binDir, bin), args...)
}

// startCommand is start for any program (the Python receiver).
func startCommand(t *testing.T, name string, env []string, path string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, logs: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Env = append(append(os.Environ(), "ONCEJOB_HTTP_ADDR=127.0.0.1:0"), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	require.NoError(t, p.cmd.Start())
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		if !p.done() {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("--- %s logs (last 4000 bytes) ---\n%s", p.name, tail(p.logs.String(), 4000))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func (p *proc) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// stop sends SIGTERM and requires a clean exit. It first waits for the
// process to have set up its signal handling (its first log line), so the
// signal is not taken by Go's default action. Stopping a process that
// already exited is a no-op.
func (p *proc) stop() {
	p.t.Helper()
	if p.done() {
		return
	}
	require.Eventually(p.t, func() bool { return p.done() || p.logs.String() != "" }, 60*time.Second, 10*time.Millisecond, "%s never logged", p.name)
	p.signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		require.NoError(p.t, p.err, "%s exit after SIGTERM", p.name)
	case <-time.After(60 * time.Second):
		p.t.Fatalf("%s did not stop on SIGTERM", p.name)
	}
}

// stopOrDieAt is stop for a process armed with a failpoint: it may die at
// the failpoint (its log says so) before the SIGTERM lands.
func (p *proc) stopOrDieAt(logLine string) {
	p.t.Helper()
	if !p.done() {
		require.Eventually(p.t, func() bool { return p.done() || p.logs.String() != "" }, 60*time.Second, 10*time.Millisecond, "%s never logged", p.name)
		p.signal(syscall.SIGTERM)
	}
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		p.t.Fatalf("%s did not stop on SIGTERM", p.name)
	}
	if p.err != nil {
		require.Contains(p.t, p.logs.String(), logLine, "%s exit after SIGTERM: %v", p.name, p.err)
	}
}

// waitHealthy waits until a serve process answers health checks; the
// bound is a hung start's, long enough for a start (and --migrate) on a
// machine at load 60 beside seven other tests' processes.
func waitHealthy(t *testing.T, p *proc, addr string) {
	t.Helper()
	waitHealthyWithin(t, p, addr, 2*time.Minute)
}

// waitHealthyWithin is waitHealthy with a deadline of its own: the fault
// sequences start many servers on a machine they load.
func waitHealthyWithin(t *testing.T, p *proc, addr string, within time.Duration) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	require.Eventually(t, func() bool {
		if p.done() {
			t.Fatalf("%s exited early: %v\n%s", p.name, p.err, p.logs)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	}, within, 50*time.Millisecond, "%s never became healthy", p.name)
}

// simProc is `oncejob llm-sim` in a process of its own, so its billing
// survives the workers it serves.
type simProc struct {
	*proc
	base string // http://addr
}

func startSim(t *testing.T) *simProc {
	t.Helper()
	addr := freeAddr(t)
	p := start(t, "llm-sim", nil, "llm-sim", "--addr", addr)
	s := &simProc{proc: p, base: "http://" + addr}
	require.Eventually(t, func() bool {
		resp, err := http.Get(s.base + "/oncejob/stats")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond)
	return s
}

func (s *simProc) stats(t *testing.T) llmsim.Stats {
	t.Helper()
	resp, err := http.Get(s.base + "/oncejob/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st llmsim.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// restartPeak returns the simulator's counters and restarts their
// PeakInFlight at the calls in flight now.
func (s *simProc) restartPeak(t *testing.T) llmsim.Stats {
	t.Helper()
	resp, err := http.Post(s.base+"/oncejob/stats/peak", "application/json", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var st llmsim.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

func (s *simProc) setFaults(t *testing.T, faults string) {
	t.Helper()
	resp, err := http.Post(s.base+"/oncejob/faults", "application/json", strings.NewReader(faults))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "set faults %s", faults)
}

// workerArgs runs `oncejob worker` against the simulator.
func workerArgs(dbURL string, sim *simProc, pipelines string, extra ...string) []string {
	return append([]string{
		"worker", "--database-url", dbURL, "--pipelines", pipelines,
		"--llm-base-url", sim.base + "/v1", "--llm-lookup-path", llmsim.LookupPath,
		"--lease-duration", "1s", "--poll-interval", "20ms", "--log-level", "debug",
	}, extra...)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}
