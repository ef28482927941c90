package e2e

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

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
// machine. An explicit -parallel wins.
const parallel = 4

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

// readmeBlock returns the fenced block that follows the marker comment in
// the README, as written.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	f, err := os.Open("../../README.md")
	require.NoError(t, err)
	defer f.Close()
	var b strings.Builder
	state := 0 // 0 before marker, 1 before fence, 2 inside block
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case state == 0 && strings.Contains(line, marker):
			state = 1
		case state == 1 && strings.HasPrefix(line, "```"):
			state = 2
		case state == 2 && strings.HasPrefix(line, "```"):
			return b.String()
		case state == 2:
			b.WriteString(line + "\n")
		}
	}
	t.Fatalf("README block after %q not found", marker)
	return ""
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

// TestReadmeGrpcurlExamples runs the README's grpcurl examples, as written,
// against the real binary.
func TestReadmeGrpcurlExamples(t *testing.T) {
	t.Parallel()
	addr := serveEmbedded(t)
	cmds := readmeExamples(t, "<!-- e2e: grpcurl examples -->")
	want := []struct {
		ok       bool
		contains []string
	}{
		{true, []string{`"outcome": "SUBMIT_OUTCOME_CREATED"`, `"status": "JOB_STATUS_QUEUED"`}},
		{true, []string{`idempotent-replayed: true`, `"outcome": "SUBMIT_OUTCOME_EXISTING"`}},
		{false, []string{`InvalidArgument`, `IDEMPOTENCY_KEY_REUSED`}},
		{false, []string{`InvalidArgument`, `idempotency-key metadata is required`}},
		{true, []string{`"message": "submitted"`, `"status": "JOB_STATUS_RUNNING"`, `"stage": "JOB_STAGE_LLM_DONE"`, `"status": "JOB_STATUS_SUCCEEDED"`, `"stage": "JOB_STAGE_PUBLISHED"`}},
		{true, []string{`"jobs": [`, `"idempotencyKey": "invoice-2026-0042"`}},
		{true, []string{`"outcome": "SUBMIT_OUTCOME_EXISTING"`, `"outcome": "SUBMIT_OUTCOME_CREATED"`, `"error": {`, `"field": "items[2].request.pipeline"`, `unknown pipeline`}},
		{true, []string{`"status": "SERVING"`}},
	}
	require.Len(t, cmds, len(want), "README examples changed: update this test")
	var jobID string
	idRE := regexp.MustCompile(`"id": "([0-9a-f-]{36})"`)
	for i, c := range cmds {
		c = strings.ReplaceAll(c, "127.0.0.1:7070", addr)
		cmd := exec.Command("bash", "-c", c)
		cmd.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if want[i].ok {
			require.NoError(t, err, "example %d:\n%s\n%s", i+1, c, out)
		} else {
			require.Error(t, err, "example %d must fail:\n%s\n%s", i+1, c, out)
		}
		for _, s := range want[i].contains {
			require.Contains(t, string(out), s, "example %d:\n%s", i+1, c)
		}
		if m := idRE.FindStringSubmatch(string(out)); m != nil {
			if jobID == "" {
				jobID = m[1]
			}
			require.Equal(t, jobID, m[1], "example %d returned another job", i+1)
		}
	}
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

// TestReadmeCurlExamples runs the README's HTTP examples, as written, with
// curl against the real binary's HTTP face.
func TestReadmeCurlExamples(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is required under CI=true (apt-get install -y curl)")
		}
		t.Skip("SKIP: curl not found; install it with: apt-get install -y curl")
	}
	httpAddr := freeAddr(t)
	grpcAddr := freeAddr(t)
	p := start(t, "serve-embedded", nil, "serve", "--data-dir", t.TempDir(), "--grpc-addr", grpcAddr, "--http-addr", httpAddr)
	t.Cleanup(p.stop)
	waitHealthy(t, p, grpcAddr)

	cmds := readmeExamples(t, "<!-- e2e: curl examples -->")
	want := [][]string{
		{`HTTP/1.1 200 OK`, `"outcome": ?"SUBMIT_OUTCOME_CREATED"`, `"status": ?"JOB_STATUS_QUEUED"`, `(?i)X-Request-Id: \S+`},
		{`HTTP/1.1 200 OK`, `(?i)Idempotent-Replayed: true`, `"outcome": ?"SUBMIT_OUTCOME_EXISTING"`},
		{`HTTP/1.1 422`, `(?i)Content-Type: application/problem\+json`, `"reason": ?"IDEMPOTENCY_KEY_REUSED"`, `"status": ?422`},
		{`HTTP/1.1 400`, `(?i)Content-Type: application/problem\+json`, `"reason": ?"IDEMPOTENCY_KEY_INVALID"`},
		{`(?m)^id: 1$`, `(?m)^id: 7$`, `JOB_STATUS_SUCCEEDED`, `(?m)^event: end$`},
		{`(?s)^retry: 1000\n\nid: 6\n`, `(?m)^event: end$`},
		{`"checkpoints": ?\[`, `"llm_attempts": ?\[`, `"counts": ?\[`},
	}
	require.Len(t, cmds, len(want), "README examples changed: update this test")
	idRE := regexp.MustCompile(`"id": ?"([0-9a-f-]{36})"`)
	var jobID string
	for i, c := range cmds {
		c = strings.ReplaceAll(c, "127.0.0.1:7071", httpAddr)
		cmd := exec.Command("bash", "-c", c)
		cmd.Env = append(os.Environ(), "JOB_ID="+jobID)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "example %d:\n%s\n%s", i+1, c, out)
		for _, re := range want[i] {
			require.Regexp(t, re, string(out), "example %d:\n%s", i+1, c)
		}
		if m := idRE.FindStringSubmatch(string(out)); m != nil {
			if jobID == "" {
				jobID = m[1]
			}
			require.Equal(t, jobID, m[1], "example %d returned another job", i+1)
		}
	}
}

// TestReadmeRunAndScheduleExamples runs the README's grpcurl examples of
// runs and schedules, as written, against the real binary; <run-id> and
// <schedule-id> stand for the ids the first answers give.
func TestReadmeRunAndScheduleExamples(t *testing.T) {
	t.Parallel()
	addr := serveEmbedded(t)
	ids := map[string]string{}
	run := func(marker string, want []struct {
		ok       bool
		contains []string
	}, capture map[int]string) {
		t.Helper()
		cmds := readmeExamples(t, marker)
		require.Len(t, cmds, len(want), "README examples changed: update this test")
		idRE := regexp.MustCompile(`"id": "([0-9a-f-]{36})"`)
		for i, c := range cmds {
			c = strings.ReplaceAll(c, "127.0.0.1:7070", addr)
			for k, v := range ids {
				c = strings.ReplaceAll(c, k, v)
			}
			cmd := exec.Command("bash", "-c", c)
			cmd.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if want[i].ok {
				require.NoError(t, err, "example %d:\n%s\n%s", i+1, c, out)
			} else {
				require.Error(t, err, "example %d must fail:\n%s\n%s", i+1, c, out)
			}
			for _, s := range want[i].contains {
				require.Contains(t, string(out), s, "example %d:\n%s", i+1, c)
			}
			if name, ok := capture[i]; ok {
				m := idRE.FindStringSubmatch(string(out))
				require.NotNil(t, m, "example %d gives an id:\n%s", i+1, out)
				ids[name] = m[1]
			}
		}
	}
	run("<!-- e2e: run examples -->", []struct {
		ok       bool
		contains []string
	}{
		{true, []string{`"state": "RUN_STATE_OPEN"`, `"pipeline": "summarize"`}},
		{true, []string{`"outcome": "SUBMIT_OUTCOME_CREATED"`, `"source": "crawler"`}},
		{true, []string{`"outcome": "SUBMIT_OUTCOME_EXISTING"`, `"alreadyInRun": true`}},
		{true, []string{`"complete": true`, `"succeeded": "2"`}},
		{true, []string{`"items": "2"`, `"succeeded": "2"`, `"computed": "2"`}},
		{true, []string{`"jobs": [`, `"idempotencyKey": "page-2"`}},
		{true, []string{`"run": {`}},
		{true, []string{`"state": "RUN_STATE_CANCELLED"`}},
	}, map[int]string{0: "<run-id>"})
	run("<!-- e2e: schedule examples -->", []struct {
		ok       bool
		contains []string
	}{
		{true, []string{`"cron": "0 3 * * *"`, `"timeZone": "Europe/Paris"`, `"nextSlotTime"`}},
		{false, []string{`InvalidArgument`, `"field": "cron"`, `above maximum`}},
		{true, []string{`"schedules": [`, `"name": "nightly report"`}},
		{true, []string{`"paused": true`}},
	}, map[int]string{0: "<schedule-id>"})
}
