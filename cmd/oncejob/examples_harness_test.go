package main_test

// The harness examples_e2e_test.go needs, and only that: a copy of the
// minimal pieces of tests/e2e's (proc_test.go, e2e_test.go,
// python_sdk_e2e_test.go, cli_e2e_test.go), left here until the README and
// examples tests move out of this package and take it with them. The end-
// to-end suite itself is tests/e2e.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// binDir holds the oncejob binary built once for this package.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "oncejob-examples-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "oncejob"), "github.com/oncejob/oncejob/cmd/oncejob")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "build oncejob: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

var jobIDRE = regexp.MustCompile(`job ([0-9a-f-]{36})`)

const python = "/usr/bin/python3"

// requirePython skips (or, under CI=true, fails) a test when Debian's
// python3 lacks grpc, protobuf, idna, pytest or psycopg2, saying how to
// install them.
func requirePython(t *testing.T) {
	t.Helper()
	probe := exec.Command(python, "-c", "import grpc, google.protobuf, idna, pytest, psycopg2")
	if out, err := probe.CombinedOutput(); err != nil {
		msg := fmt.Sprintf("SKIP: %s cannot import grpc, protobuf, idna, pytest and psycopg2 (%v: %s); install with: apt-get install -y python3-grpcio python3-protobuf python3-idna python3-pytest python3-psycopg2", python, err, strings.TrimSpace(string(out)))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

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

// start runs the oncejob binary with args; the process is killed at
// cleanup if still running. Its HTTP face listens on an ephemeral port.
func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, logs: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(binDir, "oncejob"), args...)
	p.cmd.Env = append(os.Environ(), "ONCEJOB_HTTP_ADDR=127.0.0.1:0")
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	require.NoError(t, p.cmd.Start())
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		if !p.done() {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			logs := p.logs.String()
			if len(logs) > 4000 {
				logs = logs[len(logs)-4000:]
			}
			t.Logf("--- %s logs (last 4000 bytes) ---\n%s", p.name, logs)
		}
	})
	return p
}

func (p *proc) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, once the process has logged (set up its signal
// handling), and requires a clean exit.
func (p *proc) stop() {
	p.t.Helper()
	if p.done() {
		return
	}
	require.Eventually(p.t, func() bool { return p.done() || p.logs.String() != "" }, 20*time.Second, 10*time.Millisecond, "%s never logged", p.name)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		require.NoError(p.t, p.err, "%s exit after SIGTERM", p.name)
	case <-time.After(20 * time.Second):
		p.t.Fatalf("%s did not stop on SIGTERM", p.name)
	}
}

// serveEmbedded starts the real binary as a new user would: no database,
// no provider, only a data directory (here a temp one).
func serveEmbedded(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	p := start(t, "serve-embedded", "serve", "--data-dir", t.TempDir(), "--grpc-addr", addr)
	t.Cleanup(p.stop)
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
	}, 30*time.Second, 50*time.Millisecond, "%s never became healthy", p.name)
	require.Contains(t, p.logs.String(), "DEV MODE", "dev mode must be announced")
	require.Contains(t, p.logs.String(), "built-in LLM simulator")
	return addr
}

// readmeExamples returns the shell commands of the README block that follows
// the marker comment, one per paragraph, without comment lines.
func readmeExamples(t *testing.T, marker string) []string {
	t.Helper()
	var cmds []string
	for _, para := range strings.Split(readmeBlock(t, marker), "\n\n") {
		var cur strings.Builder
		for _, line := range strings.Split(para, "\n") {
			if line != "" && !strings.HasPrefix(strings.TrimSpace(line), "#") {
				cur.WriteString(line + "\n")
			}
		}
		if cur.Len() > 0 {
			cmds = append(cmds, cur.String())
		}
	}
	return cmds
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}
