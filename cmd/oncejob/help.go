package main

import (
	"context"
	"flag"
	"io"
	"os"
	"strings"

	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
)

// Help and usage. Every command and group answers -h, -help and --help
// (and `oncejob help COMMAND...`) with its usage on stdout and exit status
// 0; a mistake (an unknown command or flag, a missing subcommand) prints
// the usage on stderr and exits 2 (cmdline.ExitUsage).

// isHelpFlag reports whether arg asks for help.
func isHelpFlag(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "--h"
}

// execute runs args against the command table. It returns the path of the
// command it ran ("run submit"), for main's error message.
func execute(ctx context.Context, args []string) (string, error) {
	switch {
	case len(args) == 0:
		groupUsage(os.Stderr, "", commands)
		return "", cmdline.UsageError("a command is required")
	case isHelpFlag(args[0]):
		groupUsage(os.Stdout, "", commands)
		return "", cmdline.ErrHelpShown
	case args[0] == "help":
		return help(ctx, args[1:])
	}
	return dispatch(ctx, "", commands, args)
}

// dispatch runs args[0] of the group path (the top level when path is
// empty) with the rest of args.
func dispatch(ctx context.Context, path string, group []command, args []string) (string, error) {
	if len(args) == 0 {
		groupUsage(os.Stderr, path, group)
		return path, cmdline.UsageError("a subcommand is required")
	}
	if isHelpFlag(args[0]) {
		groupUsage(os.Stdout, path, group)
		return path, cmdline.ErrHelpShown
	}
	c, ok := find(group, args[0])
	if !ok {
		groupUsage(os.Stderr, path, group)
		return path, cmdline.UsageError("unknown command %q", args[0])
	}
	sub := strings.TrimSpace(path + " " + c.name)
	if c.subs != nil {
		return dispatch(ctx, sub, c.subs, args[1:])
	}
	return sub, c.run(ctx, args[1:])
}

// help is `oncejob help [COMMAND [SUBCOMMAND]]`: the usage of what it
// names, on stdout.
func help(ctx context.Context, names []string) (string, error) {
	if len(names) == 1 && names[0] == commandsFlag {
		listCommands(os.Stdout)
		return "help", cmdline.ErrHelpShown
	}
	// `oncejob help --help` and `oncejob help run --help` ask for what
	// help shows anyway.
	for len(names) > 0 && isHelpFlag(names[len(names)-1]) {
		names = names[:len(names)-1]
	}
	group, path := commands, ""
	for i, name := range names {
		c, ok := find(group, name)
		if !ok {
			groupUsage(os.Stderr, path, group)
			return strings.TrimSpace("help " + path), cmdline.UsageError("unknown command %q", name)
		}
		path = strings.TrimSpace(path + " " + c.name)
		if c.subs == nil {
			if i != len(names)-1 {
				return "help " + path, cmdline.UsageError("%s has no subcommands", path)
			}
			// The command prints its own usage, flags and all.
			return path, c.run(ctx, []string{"--help"})
		}
		group = c.subs
	}
	groupUsage(os.Stdout, path, group)
	return path, cmdline.ErrHelpShown
}

// commandsFlag is the hidden `oncejob help --commands`: listCommands.
const commandsFlag = "--commands"

// listCommands prints the path of every command and subcommand of the
// table ("serve", "run", "run submit", ...), one a line, a group followed
// by its subcommands. It is for tools and tests that sweep every command
// (tests/e2e's help test) from outside the binary; usage does not list it.
func listCommands(w io.Writer) {
	var walk func(prefix string, group []command)
	walk = func(prefix string, group []command) {
		for _, c := range group {
			path := strings.TrimSpace(prefix + " " + c.name)
			cmdline.Say(w, "%s\n", path)
			walk(path, c.subs)
		}
	}
	walk("", commands)
}

func find(group []command, name string) (command, bool) {
	for _, c := range group {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// lookup returns the command at path ("keys create").
func lookup(path string) (command, bool) {
	group := commands
	var c command
	for _, name := range strings.Fields(path) {
		var ok bool
		if c, ok = find(group, name); !ok {
			return command{}, false
		}
		group = c.subs
	}
	return c, path != ""
}

// groupUsage prints the usage of a group (the top level when path is
// empty).
func groupUsage(w io.Writer, path string, group []command) {
	name := strings.TrimSpace("oncejob " + path)
	if path == "" {
		cmdline.Say(w, "usage: oncejob <command> [flags]\n\n")
	} else {
		c, _ := lookup(path)
		cmdline.Say(w, "usage: %s <command> [flags]\n\n%s\n\n", name, c.short)
	}
	cmdline.Say(w, "commands:\n")
	for _, c := range group {
		cmdline.Say(w, "  %-15s %s\n", c.name, c.short)
	}
	if path == "" {
		cmdline.Say(w, "  %-15s %s\n", "help", "show the usage of a command: oncejob help COMMAND [SUBCOMMAND]")
	}
	cmdline.Say(w, "\nRun '%s <command> --help' for a command's flags.\n", name)
}

// synopses are the arguments of the commands that take some beyond flags
// (the client commands of package cli name their own).
var synopses = map[string]string{
	"keys revoke": "[flags] ojk_<id>",
	"hash-key":    "[flags] < key",
}

// setUsage gives fs, a command's flag set named by its path ("keys
// create"), the usage every command prints: synopsis, what it does, flags.
func setUsage(fs *flag.FlagSet) {
	fs.Usage = func() {
		synopsis := synopses[fs.Name()]
		if synopsis == "" {
			synopsis = "[flags]"
		}
		cmdline.Say(fs.Output(), "usage: oncejob %s %s\n\n", fs.Name(), synopsis)
		if c, ok := lookup(fs.Name()); ok {
			cmdline.Say(fs.Output(), "%s\n\n", upperFirst(c.short))
		}
		cmdline.Say(fs.Output(), "flags:\n")
		fs.PrintDefaults()
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// asksHelp reports whether args ask for help before any "--".
func asksHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelpFlag(a) {
			return true
		}
	}
	return false
}
