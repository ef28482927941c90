// Package docs_test runs the documentation: every shell block of README.md
// and docs/guide-*.md as written, in a fresh copy of the repository, with
// the oncejob binary this package builds first on PATH; Go blocks are
// compiled in a module of their own, Python blocks run with the virtual
// environment the guide makes. The conventions are in blocks_test.go, and
// for the guides' writers in docs/guide-operations.md, "The docs test".
package docs_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// binDir holds the oncejob and grpcurl binaries built once for this
// package; it is first on PATH (and GOBIN) for every block.
var binDir string

// root is the repository's working tree.
var root string

// goFlags adds -trimpath to the caller's GOFLAGS: the package builds of a
// copy of the repository then share the build cache with this package's
// (the copy's path is not part of them), so `go install ./cmd/oncejob` in
// a block only links.
var goFlags = strings.TrimSpace(os.Getenv("GOFLAGS") + " -trimpath")

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	r, err := filepath.Abs("../..")
	if err != nil {
		return 0, err
	}
	root = r
	dir, err := os.MkdirTemp("", "oncejob-docs-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	binDir = dir
	for _, b := range [][2]string{
		{"oncejob", "./cmd/oncejob"},
		{"grpcurl", "github.com/fullstorydev/grpcurl/cmd/grpcurl"},
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b[0]), b[1])
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOFLAGS="+goFlags)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("build %s: %w", b[0], err)
		}
	}
	code := m.Run()
	if code == 0 {
		// Every block's process was waited for: none may outlive its test.
		if err := goleak.Find(); err != nil {
			return 1, fmt.Errorf("goleak: %w", err)
		}
	}
	return code, nil
}

// blockEnv is the environment of every block: the built binaries first on
// PATH, `go install` into the same directory, nothing of the caller's own
// oncejob settings.
func blockEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ONCEJOB_") || strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "GOFLAGS=") || strings.HasPrefix(kv, "GOBIN=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+binDir+":"+os.Getenv("PATH"), "GOBIN="+binDir, "GOFLAGS="+goFlags, "PYTHONDONTWRITEBYTECODE=1")
}

// freshCopy copies the repository's files (tracked, and untracked ones git
// does not ignore) into a new directory, as a fresh clone would have them
// plus the edits not committed yet.
func freshCopy(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	require.NoError(t, err, "git ls-files")
	dst := filepath.Join(t.TempDir(), "oncejob")
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		info, err := os.Lstat(src)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the working tree, or a link
		}
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		target := filepath.Join(dst, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(target), 0o755))
		require.NoError(t, os.WriteFile(target, b, info.Mode().Perm()))
	}
	return dst
}
