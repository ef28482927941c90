package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHelpEveryCommand: every command and subcommand of the binary's own
// command table answers -h, --help and `oncejob help ...` with its usage
// on stdout and exit status 0, writing nothing on stderr. A command added
// to the table without help fails here.
func TestHelpEveryCommand(t *testing.T) {
	t.Parallel()
	// The binary's hidden `help --commands` walks its command table: every
	// command and subcommand, one path a line. A group is a path others
	// extend ("run" of "run submit").
	listing, errOut, code := runCLI(t, "help", "--commands")
	require.Equal(t, 0, code, "oncejob help --commands: exit status\nstderr:\n%s", errOut)
	require.Empty(t, errOut, "oncejob help --commands: nothing on stderr")
	paths := strings.Split(strings.TrimSuffix(listing, "\n"), "\n")
	require.GreaterOrEqual(t, len(paths), 38, "the command table: %q", paths)
	groups := map[string]bool{}
	for _, p := range paths {
		if i := strings.LastIndex(p, " "); i > 0 {
			groups[p[:i]] = true
		}
	}
	require.Subset(t, paths, []string{"serve", "run", "run submit", "keys", "keys create", "schedule", "deliveries", "config", "config check"}, "the listing names commands and subcommands")
	check := func(t *testing.T, want string, args ...string) {
		t.Helper()
		out, errOut, code := runCLI(t, args...)
		require.Equal(t, 0, code, "%q: exit status\nstdout:\n%s\nstderr:\n%s", args, out, errOut)
		require.Empty(t, errOut, "%q: nothing on stderr", args)
		require.True(t, strings.HasPrefix(out, want), "%q: stdout starts with %q:\n%s", args, want, out)
	}
	top := "usage: oncejob <command> [flags]\n"
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-help"}, {"help"}, {"help", "--help"}, {"help", "-h"}} {
		check(t, top, args...)
	}
	// The top level's usage names every command.
	out, _, _ := runCLI(t, "--help")
	for _, p := range paths {
		if !strings.Contains(p, " ") {
			require.Contains(t, out, "\n  "+p+" ", "oncejob --help lists %s", p)
		}
	}
	for _, p := range paths {
		t.Run(strings.ReplaceAll(p, " ", "_"), func(t *testing.T) {
			t.Parallel()
			want := "usage: oncejob " + p + " "
			words := strings.Fields(p)
			for _, flag := range []string{"--help", "-h"} {
				check(t, want, append(words, flag)...)
			}
			check(t, want, append([]string{"help"}, words...)...)
			check(t, want, append(append([]string{"help"}, words...), "--help")...)
			if groups[p] {
				// A group lists each of its subcommands.
				out, _, _ := runCLI(t, p, "--help")
				for _, sub := range paths {
					if name, ok := strings.CutPrefix(sub, p+" "); ok {
						require.Contains(t, out, "\n  "+name+" ", "oncejob %s --help lists %s", p, name)
					}
				}
			} else {
				// A command's usage shows its flags.
				out, _, _ := runCLI(t, append(words, "--help")...)
				require.Contains(t, out, "\nflags:\n", "oncejob %s --help shows its flags", p)
				// Each flag's line is its name and its value's type: Go's
				// flag package takes `backquoted` usage text for the
				// type, which garbled "-api-key authorization: Bearer"
				// (issue 30).
				for _, line := range strings.Split(out, "\n") {
					if strings.HasPrefix(line, "  -") {
						require.Regexp(t, `^  -[a-z0-9-]+( (string|duration|int|uint|int64|float|value|bool))?$`, line, "oncejob %s --help", p)
					}
				}
			}
		})
	}
}

// TestHelpMistakesExitUsage: a mistake - no command, an unknown command or
// subcommand, an unknown flag - prints the usage on stderr, nothing on
// stdout, and exits 2.
func TestHelpMistakesExitUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args       []string
		usage, why string
	}{
		{nil, "usage: oncejob <command>", "a command is required"},
		{[]string{"no-such-command"}, "usage: oncejob <command>", `unknown command "no-such-command"`},
		{[]string{"help", "no-such-command"}, "usage: oncejob <command>", `unknown command "no-such-command"`},
		{[]string{"help", "run", "no-such-command"}, "usage: oncejob run <command>", `unknown command "no-such-command"`},
		{[]string{"run"}, "usage: oncejob run <command>", "a subcommand is required"},
		{[]string{"run", "no-such-command"}, "usage: oncejob run <command>", `unknown command "no-such-command"`},
		{[]string{"keys"}, "usage: oncejob keys <command>", "a subcommand is required"},
		{[]string{"keys", "rotate"}, "usage: oncejob keys <command>", `unknown command "rotate"`},
		{[]string{"schedule", "no-such-command"}, "usage: oncejob schedule <command>", `unknown command "no-such-command"`},
		{[]string{"deliveries"}, "usage: oncejob deliveries <command>", "a subcommand is required"},
		{[]string{"config", "lint"}, "usage: oncejob config <command>", `unknown command "lint"`},
		{[]string{"serve", "--no-such-flag"}, "usage: oncejob serve [flags]", "flag provided but not defined: -no-such-flag"},
		{[]string{"migrate", "--no-such-flag"}, "usage: oncejob migrate [flags]", "flag provided but not defined: -no-such-flag"},
		{[]string{"keys", "create", "--no-such-flag"}, "usage: oncejob keys create [flags]", "flag provided but not defined: -no-such-flag"},
		{[]string{"keys", "revoke"}, "usage: oncejob keys revoke [flags] ojk_<id>", "want exactly one key prefix"},
		{[]string{"config", "check", "--no-such-flag"}, "usage: oncejob config check [flags]", "flag provided but not defined: -no-such-flag"},
		{[]string{"get", "--no-such-flag"}, "usage: oncejob get [flags] JOB_ID", "flag provided but not defined: -no-such-flag"},
		{[]string{"run", "submit", "--no-such-flag"}, "usage: oncejob run submit [flags]", "flag provided but not defined: -no-such-flag"},
		{[]string{"llm-sim", "--no-such-flag"}, "usage: oncejob llm-sim [flags]", "flag provided but not defined: -no-such-flag"},
	} {
		out, errOut, code := runCLI(t, tc.args...)
		require.Equal(t, 2, code, "%q: exit status\nstdout:\n%s\nstderr:\n%s", tc.args, out, errOut)
		require.Empty(t, out, "%q: nothing on stdout", tc.args)
		require.True(t, strings.HasPrefix(errOut, tc.usage), "%q: the usage on stderr, starting %q:\n%s", tc.args, tc.usage, errOut)
		require.Contains(t, errOut, tc.why, "%q: says what was wrong", tc.args)
	}
}
