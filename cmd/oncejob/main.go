// Command oncejob is the one binary of oncejob: the server, the migrator and
// small client commands.
//
//	oncejob serve     run the gRPC server
//	oncejob worker    run workers only
//	oncejob relay     deliver the outbox to the sinks only
//	oncejob reconcile compare deliveries with the target systems
//	oncejob deliveries list|retry   deliveries, through a server
//	oncejob migrate   apply database migrations
//	oncejob config check  validate a config file, print the effective configuration
//	oncejob llm-sim   serve the LLM simulator
//	oncejob hash-key  print the sha256 of an API key for the keys file
//	oncejob keys create|list|revoke   API keys in the store
//	oncejob submit|get|list|watch|wait|cancel|replay|resolve|approve
//	                  client commands, on the Go SDK (clientsdk; package
//	                  internal/cli holds them and run, schedule, deliveries)
//	oncejob run submit|status|watch|list|batches|retry-failures|cancel
//	                  runs of many items
//	oncejob schedule create|list|pause|resume|delete
//	                  jobs submitted on a cron expression or an interval
//	oncejob help [COMMAND [SUBCOMMAND]]   a command's usage (or: COMMAND --help)
//
// Every command and group answers -h and --help with its usage on stdout
// and exit status 0; a mistake (an unknown command or flag, a missing
// subcommand) prints the usage on stderr and exits 2 (help.go).
//
// Every flag can also be set by an ONCEJOB_* environment variable (the flag
// name upper-cased, dashes as underscores), and those of serve, worker and
// relay in the config file (--config): a flag given on the command line
// wins over the variable, which wins over the file (settings.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // schedules' time zones, whatever the host has installed

	"github.com/oncejob/oncejob/cmd/oncejob/internal/cli"
	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
)

// command is one command of the binary: a leaf runs; a group (subs set)
// dispatches to its subcommands. The table below is the one list of
// commands: usage, `oncejob help` and the help test all walk it.
type command struct {
	name  string
	short string
	run   func(ctx context.Context, args []string) error
	subs  []command
}

// commands is the command table, filled in init: the commands' own usage
// reads it, so it cannot be a variable's initial value.
var commands []command

func init() {
	commands = []command{
		{name: "serve", short: "run the gRPC server", run: runServe},
		{name: "worker", short: "run workers only, beside serve processes on one Postgres", run: runWorker},
		{name: "relay", short: "deliver the outbox to the sinks only, beside serve processes on one Postgres", run: runRelay},
		{name: "reconcile", short: "compare deliveries with their sinks, repair what a stream lost, report", run: runReconcile},
		{name: "deliveries", short: "list or retry deliveries of events to sinks (a client of a running server)", subs: []command{
			{name: "list", short: "list deliveries: dead letters first, then pending, then delivered; and the disabled sinks", run: cli.DeliveriesList},
			{name: "retry", short: "queue a dead-lettered delivery again, or every dead letter of a sink", run: cli.DeliveriesRetry},
		}},
		{name: "migrate", short: "apply database migrations and exit", run: runMigrate},
		{name: "config", short: "check a config file: print the effective configuration, secrets masked", subs: []command{
			{name: "check", short: "validate a config file as serve, worker and relay read it; print the effective configuration", run: runConfigCheck},
		}},
		{name: "llm-sim", short: "serve the deterministic LLM simulator (OpenAI protocol) on loopback", run: runLLMSim},
		{name: "hash-key", short: "print the sha256 of an API key (read from stdin) for --api-keys", run: runHashKey},
		{name: "keys", short: "API keys in the store: create (shown once), list, revoke", subs: []command{
			{name: "create", short: "create an API key (printed once, on stdout)", run: runKeysCreate},
			{name: "list", short: "list API keys by their prefixes", run: runKeysList},
			{name: "revoke", short: "revoke an API key by its prefix", run: runKeysRevoke},
		}},
		{name: "submit", short: "submit a document once (the same command again is a replay); --wait to follow it", run: cli.Submit},
		{name: "get", short: "show a job", run: cli.Get},
		{name: "list", short: "list jobs, newest first", run: cli.List},
		{name: "watch", short: "print a job's events as they happen, until it ends", run: cli.Watch},
		{name: "wait", short: "wait until a job ends; exit with its status's code", run: cli.Wait},
		{name: "cancel", short: "cancel a job", run: cli.Cancel},
		{name: "replay", short: "queue a failed or dead-lettered job again", run: cli.Replay},
		{name: "resolve", short: "settle an OUTCOME_UNKNOWN job (--retry or --fail)", run: cli.Resolve},
		{name: "approve", short: "approve (or --reject) a job awaiting approval", run: cli.Approve},
		{name: "run", short: "runs of many items: submit a JSONL file, status, watch, list, batches, retry-failures, cancel", subs: []command{
			{name: "submit", short: "submit a JSONL file of items into a run (the same command again finishes it)", run: cli.RunSubmit},
			{name: "status", short: "show a run's progress", run: cli.RunStatus},
			{name: "watch", short: "print a run's progress as it changes, until every item is terminal", run: cli.RunWatch},
			{name: "list", short: "list runs, newest first", run: cli.RunList},
			{name: "batches", short: "list the provider batches a run's calls went into", run: cli.RunBatches},
			{name: "retry-failures", short: "replay every FAILED and DEAD_LETTERED job of a run from its checkpoint", run: cli.RunRetryFailures},
			{name: "cancel", short: "cancel a run and the jobs it created", run: cli.RunCancel},
		}},
		{name: "schedule", short: "schedules: create, list, pause, resume, delete", subs: []command{
			{name: "create", short: "create a schedule: a job submitted at each slot of a cron expression or an interval", run: cli.ScheduleCreate},
			{name: "list", short: "list schedules with their latest slots", run: cli.ScheduleList},
			{name: "pause", short: "stop a schedule firing", run: cli.SchedulePause},
			{name: "resume", short: "let a paused schedule fire again", run: cli.ScheduleResume},
			{name: "delete", short: "delete a schedule (its jobs stay)", run: cli.ScheduleDelete},
		}},
	}
}

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		// One signal ends the context; later ones are taken too, so a
		// server's graceful stop is not cut short by a second SIGTERM.
		sig := <-signals
		cancel(&cmdline.SignalError{Sig: sig.(syscall.Signal)})
	}()
	path, err := execute(ctx, os.Args[1:])
	err = cli.Explain(err)
	if err == nil || errors.Is(err, cmdline.ErrHelpShown) {
		return // help asked for is no mistake: exit 0
	}
	if se, ok := cmdline.Interrupted(ctx); ok {
		// Stopped by a signal: the command said what it had done; the
		// status is the shell's for a death by that signal.
		if !errors.Is(err, context.Canceled) && !errors.As(err, new(*cmdline.SignalError)) {
			fmt.Fprintf(os.Stderr, "oncejob %s: %v\n", path, err)
		}
		fmt.Fprintf(os.Stderr, "oncejob %s: interrupted (%s)\n", path, se.Name())
		os.Exit(128 + int(se.Sig))
	}
	if path == "" {
		fmt.Fprintf(os.Stderr, "oncejob: %v\n", err)
	} else {
		fmt.Fprintf(os.Stderr, "oncejob %s: %v\n", path, err)
	}
	os.Exit(cmdline.ExitCode(err)) // 1, or a client command's documented code
}
