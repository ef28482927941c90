package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
	"github.com/oncejob/oncejob/config"
	"github.com/oncejob/oncejob/relay"
)

// exitDiscrepancies is reconcile's exit status when it found something off
// (1 is an error, 2 a usage error).
const exitDiscrepancies = 3

// runReconcile compares the delivery journal with what should have happened
// and with the JetStream streams, queues again what a stream lost, and
// prints a summary (or --json). Exit status 0: nothing is off; 3:
// discrepancies (listed); 1: the check itself failed.
func runReconcile(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	stf := storeFlags(fs, true)
	cfgPath := configFlag(fs)
	threshold := fs.Duration("threshold", 5*time.Minute, "an event unrouted, or a delivery pending, longer than this is overdue")
	since := fs.Duration("since", 24*time.Hour, "JetStream deliveries made within this are checked against their stream")
	dryRun := fs.Bool("dry-run", false, "report what a stream lost without queueing it again")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	st, _, _, err := stf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	sinks, err := relay.OpenSinks(ctx, cfg.Sinks, st)
	if err != nil {
		return err
	}
	defer func() { _ = sinks.Close() }()
	report, err := relay.Reconcile(ctx, st, sinks, relay.ReconcileOptions{Threshold: *threshold, Since: *since, DryRun: *dryRun})
	if err != nil {
		return err
	}
	if *asJSON {
		out, err := json.MarshalIndent(report, "", "  ")
		if err != nil {
			return err
		}
		fmt.Println(string(out))
	} else {
		fmt.Print(report.Summary())
	}
	if !report.OK() {
		return cmdline.WithExitCode(exitDiscrepancies, errors.New("discrepancies found (listed above)"))
	}
	return nil
}
