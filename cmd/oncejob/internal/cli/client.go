// Package cli holds the client commands of the oncejob binary - submit,
// get, list, watch, wait, cancel, replay, resolve, approve, and the groups
// run, schedule and deliveries - on the Go SDK (clientsdk): one entry
// function per command, which package main's command table mounts. A
// client command talks to a running server only; it opens no store.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/oncejob/oncejob/clientsdk"
	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// Exit codes of the client commands, beside cmdline.ExitError (the call
// failed: refused, not found, unreachable) and cmdline.ExitUsage (bad flags
// or arguments). A command that waits for a job (submit --wait, wait,
// watch) exits with the code of the job's terminal status; 0 is SUCCEEDED.
const (
	exitFailed    = 3 // the job FAILED
	exitDead      = 4 // the job was DEAD_LETTERED
	exitCancelled = 5 // the job was CANCELLED
	exitUnknown   = 6 // the wait ended (--timeout) before the job did: its outcome is unknown
)

// statusExit returns the error a command that waited for a job ends with:
// nil when it SUCCEEDED.
func statusExit(job *oncejobv1.Job) error {
	code := map[oncejobv1.JobStatus]int{
		oncejobv1.JobStatus_JOB_STATUS_FAILED:        exitFailed,
		oncejobv1.JobStatus_JOB_STATUS_DEAD_LETTERED: exitDead,
		oncejobv1.JobStatus_JOB_STATUS_CANCELLED:     exitCancelled,
	}[job.GetStatus()]
	if job.GetStatus() == oncejobv1.JobStatus_JOB_STATUS_SUCCEEDED {
		return nil
	}
	if code == 0 {
		code = exitUnknown
	}
	msg := fmt.Sprintf("job %s is %s", job.GetId(), statusName(job.GetStatus()))
	if e := job.GetError(); e != nil {
		msg += fmt.Sprintf(": %s: %s", e.GetCode(), e.GetMessage())
	}
	return cmdline.WithExitCode(code, errors.New(msg))
}

// clientFlags are the connection and output flags of every client command.
// Only the connection flags are read from the environment (ONCEJOB_ADDR,
// ONCEJOB_API_KEY, ONCEJOB_TLS, ...): a request flag such as --key must
// never come from a variable set long ago.
type clientFlags struct {
	addr, apiKey              string
	tls                       bool
	caFile, certFile, keyFile string
	json                      bool
	timeout                   time.Duration
	attempts                  int
}

var connectionFlags = []string{"addr", "api-key", "tls", "ca-file", "cert-file", "key-file"}

func (c *clientFlags) register(fs *flag.FlagSet, timeout time.Duration) {
	fs.StringVar(&c.addr, "addr", "127.0.0.1:7070", "server address (host:port; several, comma-separated, for replicas)")
	fs.StringVar(&c.apiKey, "api-key", "", "API key, sent as the header 'authorization: Bearer KEY'; prefer ONCEJOB_API_KEY")
	fs.BoolVar(&c.tls, "tls", false, "connect over TLS (system roots unless --ca-file)")
	fs.StringVar(&c.caFile, "ca-file", "", "PEM CA certificates to trust (implies --tls)")
	fs.StringVar(&c.certFile, "cert-file", "", "PEM client certificate (implies --tls)")
	fs.StringVar(&c.keyFile, "key-file", "", "PEM client key (implies --tls)")
	fs.BoolVar(&c.json, "json", false, "print JSON instead of text")
	fs.DurationVar(&c.timeout, "timeout", timeout, "give up after this long (0: never)")
	fs.IntVar(&c.attempts, "max-attempts", clientsdk.DefaultRetryPolicy.MaxAttempts, "attempts per call while the server is unavailable (backoff with jitter, within --timeout)")
}

// parse reads the connection flags' environment variables, then args.
// Flags may follow positional arguments (`submit invoice.txt --wait`).
func (c *clientFlags) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	for _, name := range connectionFlags {
		env := "ONCEJOB_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if err := fs.Set(name, v); err != nil {
				return nil, cmdline.UsageError("%s=%q: %v", env, v, err)
			}
		}
	}
	var positional []string
	for {
		if err := cmdline.ParseArgs(fs, args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// clientCommand is the frame of a client command: its flag set with the
// client flags, its usage, and start, which parses and connects.
type clientCommand struct {
	fs *flag.FlagSet
	cf clientFlags
}

// newClientCommand makes a command; timeout is --timeout's default.
func newClientCommand(name, synopsis, about string, timeout time.Duration) *clientCommand {
	c := &clientCommand{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	c.cf.register(c.fs, timeout)
	c.fs.Usage = func() {
		cmdline.Say(c.fs.Output(), "usage: oncejob %s %s\n\n%s\n\nflags:\n", name, synopsis, about)
		c.fs.PrintDefaults()
	}
	return c
}

// retryLonger raises --max-attempts' default, for a command whose work outlives
// a server's restart (a run of thousands of items).
func (c *clientCommand) retryLonger(attempts int) {
	c.cf.attempts = attempts
	c.fs.Lookup("max-attempts").DefValue = strconv.Itoa(attempts)
}

// start parses args, which must hold exactly one positional argument named
// arg (none when arg is empty), and connects. It returns the argument.
func (c *clientCommand) start(args []string, arg string) (string, *clientsdk.Client, error) {
	pos, err := c.cf.parse(c.fs, args)
	if err != nil {
		return "", nil, err
	}
	var value string
	switch {
	case arg == "" && len(pos) > 0:
		return "", nil, cmdline.UsageError("no arguments expected, got %q", pos)
	case arg != "" && len(pos) != 1:
		return "", nil, cmdline.UsageError("want exactly one %s, got %d arguments", arg, len(pos))
	case arg != "":
		value = pos[0]
	}
	client, err := c.cf.dial()
	return value, client, err
}

// dial connects with the flags' settings.
func (c *clientFlags) dial() (*clientsdk.Client, error) {
	if err := checkAddr(c.addr); err != nil {
		return nil, err
	}
	opts := []clientsdk.Option{
		clientsdk.WithUserAgent("oncejob-cli"), clientsdk.WithTimeout(c.timeout),
		clientsdk.WithRetryPolicy(clientsdk.RetryPolicy{MaxAttempts: c.attempts}),
		clientsdk.WithDialOptions(explainDialOptions(c.addr)...),
	}
	if c.apiKey != "" {
		opts = append(opts, clientsdk.WithAPIKey(c.apiKey))
	}
	if c.tls || c.caFile != "" || c.certFile != "" || c.keyFile != "" {
		cfg, err := clientsdk.TLSConfig(c.caFile, c.certFile, c.keyFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, clientsdk.WithTLS(cfg))
	}
	return clientsdk.Dial(c.addr, opts...)
}

// context bounds a command that waits by --timeout.
func (c *clientFlags) context(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.timeout)
}

func statusName(s oncejobv1.JobStatus) string {
	return strings.TrimPrefix(s.String(), "JOB_STATUS_")
}

func stageName(s oncejobv1.JobStage) string {
	if s == oncejobv1.JobStage_JOB_STAGE_UNSPECIFIED {
		return "-"
	}
	return strings.ToLower(strings.TrimPrefix(s.String(), "JOB_STAGE_"))
}

// parseStatus accepts "succeeded", "SUCCEEDED" or "JOB_STATUS_SUCCEEDED".
func parseStatus(s string) (oncejobv1.JobStatus, error) {
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "JOB_STATUS_") {
		name = "JOB_STATUS_" + name
	}
	v, ok := oncejobv1.JobStatus_value[name]
	if !ok || v == 0 {
		return 0, cmdline.UsageError("unknown status %q", s)
	}
	return oncejobv1.JobStatus(v), nil
}

// parseStage accepts "llm_done", "LLM_DONE" or "JOB_STAGE_LLM_DONE".
func parseStage(s string) (oncejobv1.JobStage, error) {
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "JOB_STAGE_") {
		name = "JOB_STAGE_" + name
	}
	v, ok := oncejobv1.JobStage_value[name]
	if !ok || v == 0 {
		return 0, cmdline.UsageError("unknown stage %q", s)
	}
	return oncejobv1.JobStage(v), nil
}
