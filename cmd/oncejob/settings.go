package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
	"github.com/oncejob/oncejob/config"
)

// Settings: where a flag's value comes from. A command that has --config
// takes, for each of its flags, in this order of precedence:
//
//	the command line  >  ONCEJOB_<FLAG>  >  the config file  >  the default
//
// The config file holds the flags of serve, worker and relay by name (see
// package config); one file serves all three, so a key that is a flag of
// any of them is accepted by each, and used by those that have it. A key
// that is a flag of none of them is an error naming it. The set of known
// names is read from the commands' own flag sets, so a flag added to any
// of them is settable from the file with no more work.

// configCommand is a command whose flags the config file holds.
type configCommand struct {
	name string
	run  func(ctx context.Context, args []string) error
}

// configCommands are serve, worker and relay (a function, not a variable:
// the commands themselves read the list).
func configCommands() []configCommand {
	return []configCommand{{"serve", runServe}, {"worker", runWorker}, {"relay", runRelay}}
}

// configFlag declares --config.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "config file (YAML): any flag of serve, worker and relay by name, and the sinks: section; flags and ONCEJOB_* variables override it (docs/operations.md)")
}

// captureFlags, as a command's only argument, makes parseFlags hand back
// the command's flag set (flagsCaptured) instead of running it.
const captureFlags = "\x00capture-flags"

type flagsCaptured struct{ fs *flag.FlagSet }

func (*flagsCaptured) Error() string { return "flags captured" }

// commandFlags returns the flag set of a command that parses with
// parseFlags, with its defaults.
func commandFlags(run func(ctx context.Context, args []string) error) (*flag.FlagSet, error) {
	var fc *flagsCaptured
	if err := run(context.Background(), []string{captureFlags}); !errors.As(err, &fc) {
		return nil, fmt.Errorf("internal error: the command did not hand back its flags: %w", err)
	}
	return fc.fs, nil
}

// parseFlags parses args over the values of the config file (when fs has
// --config and it is set, on the command line or in ONCEJOB_CONFIG) and
// of the flags' ONCEJOB_* environment variables.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if len(args) == 1 && args[0] == captureFlags {
		return &flagsCaptured{fs: fs}
	}
	setUsage(fs)
	if fs.Lookup("config") != nil && !asksHelp(args) {
		if path := configPath(args); path != "" {
			file, err := config.Load(path)
			if err != nil {
				return err
			}
			if _, err := applyFile(fs, file); err != nil {
				return err
			}
		}
	}
	if _, err := applyEnv(fs); err != nil {
		return err
	}
	return cmdline.ParseArgs(fs, args)
}

// configPath is --config's value in args, else ONCEJOB_CONFIG's.
func configPath(args []string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "config" {
			continue
		}
		if hasValue {
			return value
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return os.Getenv("ONCEJOB_CONFIG")
}

// envName is the environment variable of a flag.
func envName(flagName string) string {
	return "ONCEJOB_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets each flag of fs whose ONCEJOB_* variable is set, and
// returns their names.
func applyEnv(fs *flag.FlagSet) ([]string, error) {
	var set []string
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		env := envName(f.Name)
		if v, ok := os.LookupEnv(env); ok && err == nil {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %w", env, v, e)
			}
			set = append(set, f.Name)
		}
	})
	return set, err
}

// applyFile sets each flag of fs that the file sets, and returns their
// names. A key that is a flag of no config command is an error, as is a
// value the flag refuses; both name the key and its line.
func applyFile(fs *flag.FlagSet, file *config.File) ([]string, error) {
	known, err := knownFlags()
	if err != nil {
		return nil, err
	}
	var set []string
	for _, s := range file.Settings {
		if !known[s.Name] || s.Name == "config" {
			return nil, fmt.Errorf("%s: line %d: unknown key %q: not a flag of serve, worker or relay", file.Path, s.Line, s.Name)
		}
		f := fs.Lookup(s.Name)
		if f == nil {
			continue // another command's flag
		}
		if err := f.Value.Set(s.Value); err != nil {
			return nil, fmt.Errorf("%s: line %d: %s: invalid value %q: %w", file.Path, s.Line, s.Name, s.Value, err)
		}
		set = append(set, s.Name)
	}
	return set, nil
}

// knownFlags are the names of the config commands' flags.
func knownFlags() (map[string]bool, error) {
	known := map[string]bool{}
	for _, c := range configCommands() {
		fs, err := commandFlags(c.run)
		if err != nil {
			return nil, err
		}
		fs.VisitAll(func(f *flag.Flag) { known[f.Name] = true })
	}
	return known, nil
}

// secretFlag reports whether a flag's value is masked when shown: its name
// says it is a key, a secret, a password or a token.
func secretFlag(name string) bool {
	name = strings.ToLower(name)
	return slices.ContainsFunc([]string{"key", "secret", "password", "token"}, func(w string) bool {
		return strings.Contains(name, w)
	})
}
