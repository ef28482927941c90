package main_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

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

// runIn runs a shell command in dir with the built binaries first on PATH.
func runIn(t *testing.T, dir, addr, command string, env ...string) string {
	t.Helper()
	cmd := exec.Command("bash", "-ec", command)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"), "ONCEJOB_ADDR="+addr, "PYTHONDONTWRITEBYTECODE=1"), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s\n%s", command, out)
	return string(out)
}

// TestReadmeCLIQuickstart runs the README's CLI quick start as written (the
// binary it installs is the one this package built) in a fresh directory.
func TestReadmeCLIQuickstart(t *testing.T) {
	addr := serveEmbedded(t)
	cmds := readmeExamples(t, "<!-- e2e: cli quickstart -->")
	require.Len(t, cmds, 4, "README CLI quick start changed: update this test")
	require.True(t, strings.HasPrefix(cmds[0], "go install ./cmd/oncejob"), cmds[0])
	dir := t.TempDir()

	out := runIn(t, dir, addr, cmds[1])
	m := jobIDRE.FindStringSubmatch(out)
	require.NotNil(t, m, out)
	id := m[1]
	for _, s := range []string{"submitted: job " + id, "text_extracted", "llm_done", "published", "SUCCEEDED"} {
		require.Contains(t, out, s)
	}
	out = runIn(t, dir, addr, cmds[2])
	require.Contains(t, out, "replayed: job "+id)
	out = runIn(t, dir, addr, cmds[3])
	require.Regexp(t, id+`\s+SUCCEEDED\s+published\s+summarize`, out)
	require.Contains(t, out, `"id":"`+id+`"`)
}

// TestExamplesAndQuickstarts: the README's Go and Python quick starts are
// the files in examples/, and every example runs against the real binary.
// The Go and Python SDKs derive the same key for the same request, so the
// Python run replays the Go run's job.
func TestExamplesAndQuickstarts(t *testing.T) {
	requirePython(t)
	goSrc, err := os.ReadFile("../../examples/quickstart/main.go")
	require.NoError(t, err)
	require.Equal(t, string(goSrc), readmeBlock(t, "<!-- e2e: go quickstart -->"), "README's Go quick start must be examples/quickstart/main.go")
	pySrc, err := os.ReadFile("../../examples/python/quickstart.py")
	require.NoError(t, err)
	require.Equal(t, string(pySrc), readmeBlock(t, "<!-- e2e: python quickstart -->"), "README's Python quick start must be examples/python/quickstart.py")

	build := exec.Command("go", "build", "-o", filepath.Join(binDir, "quickstart"), "github.com/oncejob/oncejob/examples/quickstart")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	addr := serveEmbedded(t)
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	idRE := regexp.MustCompile(`job ([0-9a-f-]{36}) \(replayed: (true|false|True|False)\)`)

	first := runIn(t, root, addr, "quickstart")
	m := idRE.FindStringSubmatch(first)
	require.NotNil(t, m, first)
	id := m[1]
	require.Equal(t, "false", m[2])
	require.Contains(t, first, "job "+id+" (replayed: false)\ndeduplicated: false (a new computation)\n")
	require.Contains(t, first, "JOB_STATUS_SUCCEEDED JOB_STAGE_PUBLISHED")
	require.Contains(t, first, "summary: Invoice 42")

	again := runIn(t, root, addr, "quickstart")
	require.Contains(t, again, "job "+id+" (replayed: true)\ndeduplicated: false (a new computation)\n")

	py := runIn(t, root, addr, python+" examples/python/quickstart.py", "PYTHONPATH="+filepath.Join(root, "clientsdk/python"))
	require.Contains(t, py, "job "+id+" (replayed: True)\ndeduplicated: false (a new computation)\n", "Python derives Go's key")
	require.Contains(t, py, "JOB_STATUS_SUCCEEDED JOB_STAGE_PUBLISHED")
	require.Contains(t, py, "summary: Invoice 42")

	watched := runIn(t, root, addr, python+" examples/python/resilient_watch.py 1", "PYTHONPATH="+filepath.Join(root, "clientsdk/python"))
	require.Contains(t, watched, id+" JOB_STATUS_SUCCEEDED JOB_STAGE_PUBLISHED")

	// On a server where the same computation already ran under another
	// key, the quick starts say their job is deduplicated, and from which.
	addr2 := serveEmbedded(t)
	doc := writeFile(t, "invoice.txt", "Invoice 42: 3 licences, EUR 1,200, due 2026-12-31.")
	other := runIn(t, root, addr2, "oncejob submit --key another-intent --wait "+doc)
	m = regexp.MustCompile(`submitted: job ([0-9a-f-]{36})`).FindStringSubmatch(other)
	require.NotNil(t, m, other)
	computed := m[1]
	py = runIn(t, root, addr2, python+" examples/python/quickstart.py", "PYTHONPATH="+filepath.Join(root, "clientsdk/python"))
	m = regexp.MustCompile(`job ([0-9a-f-]{36}) \(replayed: False\)\ndeduplicated: true \(job ` + computed + ` already computed it; no new generation\)\n`).FindStringSubmatch(py)
	require.NotNil(t, m, py)
	require.NotEqual(t, computed, m[1], "a job of its own, with the other's result")
	require.Contains(t, py, "summary: Invoice 42")
	goOut := runIn(t, root, addr2, "quickstart")
	require.Contains(t, goOut, "job "+m[1]+" (replayed: true)\ndeduplicated: true (job "+computed+" already computed it; no new generation)\n", "Go replays Python's job")
}
