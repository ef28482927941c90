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
//	                  client commands, on the Go SDK (clientsdk)
//	oncejob run submit|status|watch|list|retry-failures|cancel
//	                  runs of many items
//	oncejob schedule create|list|pause|resume|delete
//	                  jobs submitted on a cron expression or an interval
//
// Every flag can also be set by an ONCEJOB_* environment variable (the flag
// name upper-cased, dashes as underscores), and those of serve, worker and
// relay in the config file (--config): a flag given on the command line
// wins over the variable, which wins over the file (settings.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // schedules' time zones, whatever the host has installed
)

type command struct {
	name  string
	short string
	run   func(ctx context.Context, args []string) error
}

var commands = []command{
	{"serve", "run the gRPC server", runServe},
	{"worker", "run workers only, beside serve processes on one Postgres", runWorker},
	{"relay", "deliver the outbox to the sinks only, beside serve processes on one Postgres", runRelay},
	{"reconcile", "compare deliveries with their sinks, repair what a stream lost, report", runReconcile},
	{"deliveries", "list or retry deliveries of events to sinks (a client of a running server)", runDeliveries},
	{"migrate", "apply database migrations and exit", runMigrate},
	{"config", "check a config file: print the effective configuration, secrets masked", runConfig},
	{"llm-sim", "serve the deterministic LLM simulator (OpenAI protocol) on loopback", runLLMSim},
	{"hash-key", "print the sha256 of an API key (read from stdin) for --api-keys", runHashKey},
	{"keys", "API keys in the store: create (shown once), list, revoke", runKeys},
	{"submit", "submit a document once (the same command again is a replay); --wait to follow it", runSubmit},
	{"get", "show a job", runGet},
	{"list", "list jobs, newest first", runList},
	{"watch", "print a job's events as they happen, until it ends", runWatch},
	{"wait", "wait until a job ends; exit with its status's code", runWait},
	{"cancel", "cancel a job", runCancel},
	{"replay", "queue a failed or dead-lettered job again", runReplay},
	{"resolve", "settle an OUTCOME_UNKNOWN job (--retry or --fail)", runResolve},
	{"approve", "approve (or --reject) a job awaiting approval", runApprove},
	{"run", "runs of many items: submit a JSONL file, status, watch, list, retry-failures, cancel", runRun},
	{"schedule", "schedules: create, list, pause, resume, delete", runSchedule},
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, c := range commands {
		if c.name == os.Args[1] {
			if err := c.run(ctx, os.Args[2:]); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					os.Exit(2)
				}
				fmt.Fprintf(os.Stderr, "oncejob %s: %v\n", c.name, err)
				os.Exit(exitCode(err)) // 1, or a client command's documented code

			}
			return
		}
	}
	fmt.Fprintf(os.Stderr, "oncejob: unknown command %q\n\n", os.Args[1])
	usage()
	os.Exit(2)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: oncejob <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", c.name, c.short)
	}
}
