package docs_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The conventions of a fenced block in README.md and docs/guide-*.md:
//
//   - ```sh and ```bash blocks run as written, in order, in the directory of
//     a fresh copy of the repository (one copy per file, so a file sees what
//     its earlier blocks made and nothing of another file's). Each
//     paragraph (commands between blank lines) must exit 0 unless the
//     block's marker expects otherwise; shell variables carry from one
//     paragraph to the next, as in a terminal.
//   - A block whose first line is "# in another terminal" is long-running
//     (a server, a receiver, a watch): it is started in the background, the
//     next block runs once the 127.0.0.1 addresses it names that did not
//     answer before (and 7070 and 7071 for `oncejob serve` without
//     --grpc-addr, which must be free) accept connections, and it is
//     stopped after the file's last block.
//   - A block whose first line is "# not run by the docs test: REASON"
//     is not run; the test counts and logs them.
//   - ```go blocks are complete files: compiled (go vet) in a module of
//     their own that uses this repository through a replace directive.
//   - ```python blocks run with the python of the .venv an earlier block of
//     the same file made.
//   - A "<!-- e2e: NAME -->" line right before a block names it: the test
//     checks what each of its paragraphs prints (expectations below).
const (
	backgroundLine = "# in another terminal"
	notRunPrefix   = "# not run by the docs test: "
)

type block struct {
	file   string // relative to the repository root
	line   int    // of the opening fence
	lang   string
	text   string
	marker string
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

var (
	markerRE = regexp.MustCompile(`^<!-- e2e: (.+) -->$`)
	fenceRE  = regexp.MustCompile("^```([A-Za-z0-9_+-]*)\\s*$") // an opening fence and its language
)

// parseBlocks returns the fenced blocks of a Markdown file, in order.
func parseBlocks(t *testing.T, rel string) []block {
	t.Helper()
	f, err := os.Open(filepath.Join(root, rel))
	require.NoError(t, err)
	defer f.Close()
	var (
		blocks []block
		cur    *block
		body   strings.Builder
		marker string
		n      int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur == nil && fenceRE.MatchString(line):
			cur = &block{file: rel, line: n, lang: fenceRE.FindStringSubmatch(line)[1], marker: marker}
			body.Reset()
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.text = body.String()
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line + "\n")
		}
		if cur == nil {
			if m := markerRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
				marker = m[1]
			} else if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "```") {
				marker = ""
			}
		}
	}
	require.NoError(t, sc.Err())
	require.Nil(t, cur, "%s: a block is not closed", rel)
	return blocks
}

// docFiles are the files whose blocks run: the README, then the guides.
func docFiles(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob(filepath.Join(root, "docs", "guide-*.md"))
	require.NoError(t, err)
	sort.Strings(guides)
	files := []string{"README.md"}
	for _, g := range guides {
		rel, err := filepath.Rel(root, g)
		require.NoError(t, err)
		files = append(files, rel)
	}
	return files
}

// requireTool skips (or, under CI=true, fails) when a program the guides
// use is missing, with the command that installs it.
func requireTool(t *testing.T, probe []string, install string) {
	t.Helper()
	if out, err := exec.Command(probe[0], probe[1:]...).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("SKIP: %s failed (%v: %s); install with: %s", strings.Join(probe, " "), err, bytes.TrimSpace(out), install)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// requireListening skips (or, under CI=true, fails) when a service the
// guides use does not answer.
func requireListening(t *testing.T, addr, what string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		msg := fmt.Sprintf("SKIP: %s does not answer on %s (%v); start it (.ci/run says how)", what, addr, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	_ = c.Close()
}

// TestDocBlocks runs every shell and Python block of the README and the
// guides as written (see the conventions above).
func TestDocBlocks(t *testing.T) {
	requireTool(t, []string{"curl", "--version"}, "apt-get install -y curl")
	requireTool(t, []string{"/usr/bin/python3", "-c", "import venv, ensurepip, grpc, google.protobuf, idna, setuptools, wheel"},
		"apt-get install -y python3-venv python3-grpcio python3-protobuf python3-idna python3-setuptools python3-wheel")
	requireTool(t, []string{"createdb", "--version"}, "apt-get install -y postgresql-client")
	requireTool(t, []string{"npm", "--version"}, "apt-get install -y nodejs npm")
	requireListening(t, "127.0.0.1:5432", "Postgres")
	requireListening(t, "127.0.0.1:4222", "NATS (nats-server -js)")
	var ran, notRun int
	for _, file := range docFiles(t) {
		t.Run(strings.ReplaceAll(file, "/", "_"), func(t *testing.T) {
			r, s := runFile(t, file)
			ran += r
			notRun += s
		})
	}
	t.Logf("blocks run: %d; not run (marked %q): %d", ran, notRunPrefix, notRun)
}

// runFile runs the blocks of one file in a fresh copy of the repository.
func runFile(t *testing.T, file string) (ran, notRun int) {
	dir := freshCopy(t)
	var bg []*background
	defer func() {
		for i := len(bg) - 1; i >= 0; i-- {
			bg[i].stop(t)
		}
	}()
	seen := map[string]bool{}
	for _, b := range parseBlocks(t, file) {
		if b.marker != "" {
			seen[b.marker] = true
		}
		first, _, _ := strings.Cut(b.text, "\n")
		switch {
		case b.lang != "sh" && b.lang != "bash" && b.lang != "python":
			continue
		case strings.HasPrefix(first, notRunPrefix):
			reason := strings.TrimSpace(strings.TrimPrefix(first, notRunPrefix))
			require.NotEmpty(t, reason, "%s: a block not run says why", b)
			t.Logf("%s: not run: %s", b, reason)
			notRun++
			continue
		case b.lang == "python":
			runPython(t, dir, b)
		case strings.TrimSpace(first) == backgroundLine:
			bg = append(bg, startBackground(t, dir, b))
		default:
			runShell(t, dir, b)
		}
		ran++
	}
	for name := range expectations {
		if strings.HasPrefix(name, file+": ") {
			require.True(t, seen[name[len(file)+2:]], "%s: no block is marked <!-- e2e: %s -->", file, name[len(file)+2:])
		}
	}
	return ran, notRun
}

// paragraphs splits a shell block at blank lines that are not inside a
// here-document.
func paragraphs(text string) []string {
	var (
		out     []string
		cur     strings.Builder
		heredoc string
	)
	hereRE := regexp.MustCompile(`(?:^|[^<])<<-?\s*['"]?([A-Za-z_]+)['"]?`) // not a <<< here-string
	flush := func() {
		if s := cur.String(); strings.TrimSpace(s) != "" && !onlyComments(s) {
			out = append(out, s)
		}
		cur.Reset()
	}
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		switch {
		case heredoc != "":
			if strings.TrimSpace(line) == heredoc {
				heredoc = ""
			}
		case strings.TrimSpace(line) == "":
			flush()
			continue
		default:
			if m := hereRE.FindStringSubmatch(line); m != nil {
				heredoc = m[1]
			}
		}
		cur.WriteString(line + "\n")
	}
	flush()
	return out
}

func onlyComments(s string) bool {
	for _, line := range strings.Split(s, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// blockTimeout bounds one block: a command that never ends (a watch that
// should have been marked as running in another terminal) fails the test
// instead of hanging it.
const blockTimeout = 3 * time.Minute

// runShell runs a block's paragraphs in one bash, each paragraph's output
// and exit status recorded, and checks them.
func runShell(t *testing.T, dir string, b block) {
	t.Helper()
	paras := paragraphs(b.text)
	outDir := t.TempDir()
	var script strings.Builder
	script.WriteString("set -o pipefail\n")
	for i, p := range paras {
		fmt.Fprintf(&script, "{\n%s} >%q 2>&1 </dev/null; echo $? >%q\n", p,
			filepath.Join(outDir, strconv.Itoa(i)), filepath.Join(outDir, strconv.Itoa(i)+".rc"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	cmd.Env = blockEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		for i, p := range paras {
			got, _ := os.ReadFile(filepath.Join(outDir, strconv.Itoa(i)))
			t.Logf("%s: paragraph %d:\n%s--- output:\n%s", b, i+1, p, got)
		}
		t.Fatalf("%s: the block's shell failed (timeout %s?): %v\n%s", b, blockTimeout, err, out)
	}

	want := expectations[b.file+": "+b.marker]
	if b.marker != "" && want == nil {
		t.Fatalf("%s: marker %q has no expectations in this test", b, b.marker)
	}
	if want != nil {
		require.Len(t, paras, len(want), "%s (%s): its paragraphs changed: update the expectations", b, b.marker)
	}
	for i, p := range paras {
		got, err := os.ReadFile(filepath.Join(outDir, strconv.Itoa(i)))
		require.NoError(t, err, "%s: paragraph %d did not run:\n%s", b, i+1, p)
		rcText, err := os.ReadFile(filepath.Join(outDir, strconv.Itoa(i)+".rc"))
		require.NoError(t, err, "%s: paragraph %d did not finish:\n%s", b, i+1, p)
		rc, err := strconv.Atoi(strings.TrimSpace(string(rcText)))
		require.NoError(t, err)
		okWanted := true
		var patterns []string
		if want != nil {
			okWanted, patterns = want[i].ok, want[i].matches
		}
		if okWanted {
			require.Zero(t, rc, "%s: paragraph %d exited %d:\n%s\n--- output:\n%s", b, i+1, rc, p, got)
		} else {
			require.NotZero(t, rc, "%s: paragraph %d must fail:\n%s\n--- output:\n%s", b, i+1, p, got)
		}
		for _, re := range patterns {
			require.Regexp(t, re, string(got), "%s: paragraph %d:\n%s", b, i+1, p)
		}
		t.Logf("%s: paragraph %d: exit %d", b, i+1, rc)
	}
}

// runPython runs a Python block with the .venv's python, as the guide says.
func runPython(t *testing.T, dir string, b block) {
	t.Helper()
	py := filepath.Join(dir, ".venv", "bin", "python")
	_, err := os.Stat(py)
	require.NoError(t, err, "%s: a Python block needs the .venv an earlier block of the file makes", b)
	src := filepath.Join(t.TempDir(), "block.py")
	require.NoError(t, os.WriteFile(src, []byte(b.text), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, src)
	cmd.Dir = dir
	cmd.Env = blockEnv()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s:\n%s", b, out)
	if want := expectations[b.file+": "+b.marker]; want != nil {
		for _, re := range want[0].matches {
			require.Regexp(t, re, string(out), "%s", b)
		}
	}
}

// background is a long-running block.
type background struct {
	b    block
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

// addrRE finds the addresses a block listens on: 127.0.0.1:PORT as a word of
// its own (an argument), not inside a URL (a database, a sink, a NATS server).
var addrRE = regexp.MustCompile(`(?:^|[\s'"=])127\.0\.0\.1:(\d+)`)

// startBackground starts a long-running block and waits until the
// addresses it serves accept connections.
func startBackground(t *testing.T, dir string, b block) *background {
	t.Helper()
	ports := map[string]bool{}
	for _, m := range addrRE.FindAllStringSubmatch(b.text, -1) {
		ports[m[1]] = true
	}
	if regexp.MustCompile(`\boncejob serve\b`).MatchString(b.text) && !strings.Contains(b.text, "--grpc-addr") {
		ports["7070"], ports["7071"] = true, true
	}
	serves := regexp.MustCompile(`\boncejob serve\b`).MatchString(b.text)
	for p := range ports {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+p, time.Second); err == nil {
			_ = c.Close()
			if serves {
				t.Fatalf("%s: 127.0.0.1:%s is in use before the block starts: stop what listens there (the guides use the default ports)", b, p)
			}
			delete(ports, p) // a client of it: nothing to wait for
		}
	}
	bg := &background{b: b, out: &syncBuffer{}, done: make(chan struct{})}
	bg.cmd = exec.Command("bash", "-c", b.text)
	bg.cmd.Dir = dir
	bg.cmd.Env = blockEnv()
	bg.cmd.Stdout, bg.cmd.Stderr = bg.out, bg.out
	bg.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, bg.cmd.Start(), "%s", b)
	go func() { _ = bg.cmd.Wait(); close(bg.done) }()
	deadline := time.Now().Add(3 * time.Minute)
	for p := range ports {
		for {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+p, time.Second)
			if err == nil {
				_ = c.Close()
				break
			}
			select {
			case <-bg.done:
				t.Fatalf("%s: the background block exited before 127.0.0.1:%s answered:\n%s", b, p, bg.out.String())
			default:
			}
			if time.Now().After(deadline) {
				bg.stop(t)
				t.Fatalf("%s: 127.0.0.1:%s did not answer:\n%s", b, p, bg.out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Logf("%s: started in the background (ports %v)", b, keys(ports))
	return bg
}

// stop sends SIGTERM to the block's process group, SIGKILL if it is still
// there 30 s later, and logs what it printed when the test failed.
func (bg *background) stop(t *testing.T) {
	t.Helper()
	select {
	case <-bg.done:
		t.Logf("%s: had exited:\n%s", bg.b, bg.out.String())
		return
	default:
	}
	_ = syscall.Kill(-bg.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-bg.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-bg.cmd.Process.Pid, syscall.SIGKILL)
		<-bg.done
	}
	if t.Failed() {
		t.Logf("%s: stopped; it printed:\n%s", bg.b, tail(bg.out.String(), 8000))
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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
