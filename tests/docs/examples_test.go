package docs_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// markedBlock returns the block of a file under a marker.
func markedBlock(t *testing.T, file, marker string) block {
	t.Helper()
	for _, b := range parseBlocks(t, file) {
		if b.marker == marker {
			return b
		}
	}
	t.Fatalf("%s: no block marked %q", file, marker)
	return block{}
}

// TestQuickstartsAreTheExamples: the guides' Go and Python quick starts are
// the files in examples/, which their blocks run.
func TestQuickstartsAreTheExamples(t *testing.T) {
	for _, c := range []struct{ file, marker, example string }{
		{"docs/guide-go.md", "go quickstart", "examples/quickstart/main.go"},
		{"docs/guide-python.md", "python quickstart", "examples/python/quickstart.py"},
	} {
		src, err := os.ReadFile(filepath.Join(root, c.example))
		require.NoError(t, err)
		require.Equal(t, string(src), markedBlock(t, c.file, c.marker).text, "%s: the quick start must be %s", c.file, c.example)
	}
}

// TestDocGoBlocks compiles every Go block of the README and the guides (go
// vet), each as the main package of a module of its own that uses this
// repository through a replace directive, as a user's module would before
// the module is published.
func TestDocGoBlocks(t *testing.T) {
	dir := t.TempDir()
	var n int
	for _, file := range docFiles(t) {
		for _, b := range parseBlocks(t, file) {
			if b.lang != "go" {
				continue
			}
			n++
			pkg := filepath.Join(dir, fmt.Sprintf("block%d", n))
			require.NoError(t, os.MkdirAll(pkg, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(pkg, "main.go"), []byte(b.text), 0o600))
			t.Logf("%s: block%d", b, n)
		}
	}
	require.Positive(t, n, "no Go block found")
	for _, args := range [][]string{
		{"mod", "init", "example.com/docblocks"},
		{"mod", "edit", "-replace", "github.com/oncejob/oncejob=" + root},
		{"mod", "tidy"},
		{"vet", "./..."},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = blockEnv()
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
	}
}

// hardCodedAddr finds a client made on a literal address in a Go or Python
// block: a reader whose server is elsewhere (ONCEJOB_ADDR, as the CLI reads
// it) would have to edit the snippet.
var hardCodedAddr = regexp.MustCompile(`(?:Dial|Client|AsyncClient)\(\s*"[^"]*:\d+"`)

// TestDocClientsReadOncejobAddr: every Go and Python block of the README
// and the guides that dials the server takes ONCEJOB_ADDR before the
// default address, as the CLI does - three of them hard-coded
// 127.0.0.1:7070 (issue 30, finding 8).
func TestDocClientsReadOncejobAddr(t *testing.T) {
	var bad []string
	n := 0
	for _, file := range docFiles(t) {
		for _, b := range parseBlocks(t, file) {
			if b.lang != "go" && b.lang != "python" && !strings.Contains(b.text, "<<'GO'") {
				continue
			}
			if strings.Contains(b.text, "ONCEJOB_ADDR") {
				n++
			}
			if hardCodedAddr.MatchString(b.text) {
				bad = append(bad, b.String()+": "+hardCodedAddr.FindString(b.text))
			}
		}
	}
	require.Empty(t, bad, "dial cmp.Or(os.Getenv(\"ONCEJOB_ADDR\"), ...) / os.environ.get(\"ONCEJOB_ADDR\", ...)")
	require.Positive(t, n)
}
