// Package cmdline is what every command of the oncejob binary shares,
// server commands and client commands alike: errors that carry an exit
// status, parsing a command's flags (help on stdout, a mistake on stderr),
// the signal that stopped a command, and writing its output. Package main
// holds the command table and turns a command's error into the process's
// exit status; package cli holds the client commands.
package cmdline

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Exit statuses every command shares. A command may document more of its
// own (the client commands' job statuses, reconcile's discrepancies).
const (
	ExitError = 1 // the command failed
	ExitUsage = 2 // bad flags or arguments
)

// ErrHelpShown is returned by a command whose usage was asked for and
// printed: main exits 0 without a word more.
var ErrHelpShown = errors.New("help shown")

// exitCodeError carries an exit status up to main.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string { return e.err.Error() }
func (e *exitCodeError) Unwrap() error { return e.err }

// WithExitCode makes err end the process with exit status code.
func WithExitCode(code int, err error) error {
	return &exitCodeError{code: code, err: err}
}

// ExitCode is the status the process exits with for err: the one
// WithExitCode gave it, else ExitError.
func ExitCode(err error) int {
	var e *exitCodeError
	if errors.As(err, &e) {
		return e.code
	}
	return ExitError
}

// UsageError is a mistake in the command line: exit status ExitUsage.
func UsageError(format string, args ...any) error {
	return WithExitCode(ExitUsage, fmt.Errorf(format, args...))
}

// ParseArgs parses args into fs: asked for help, it prints the usage on
// stdout and returns ErrHelpShown; a mistake prints the usage on stderr
// and returns a usage error (exit 2).
func ParseArgs(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard) // the flag package's own print goes to one stream; ours to the right one
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(os.Stdout)
		fs.Usage()
		return ErrHelpShown
	default:
		fs.SetOutput(os.Stderr)
		fs.Usage()
		Say(os.Stderr, "\n")
		return UsageError("%v", err)
	}
}

// Say writes a command's output. A write to stdout that fails (a closed
// pipe) is not worth failing a command that already did its work.
func Say(w io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(w, format, args...)
}

// SignalError is the cause of the command's context's end when a signal
// stopped the command.
type SignalError struct{ Sig syscall.Signal }

func (e *SignalError) Error() string { return "interrupted by " + e.Name() }

// Name is the signal's name, as a shell says it (SIGINT).
func (e *SignalError) Name() string {
	switch e.Sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return e.Sig.String()
}

// Interrupted reports the signal that ended ctx, if one did.
func Interrupted(ctx context.Context) (*SignalError, bool) {
	var se *SignalError
	ok := errors.As(context.Cause(ctx), &se)
	return se, ok
}
