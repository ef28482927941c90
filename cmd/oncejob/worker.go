package main

import (
	"context"
	"flag"
)

// runWorker runs workers only: no gRPC, any number of them beside `serve`
// processes on one Postgres.
func runWorker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	stf := storeFlags(fs, false)
	eng := engineFlags(fs, 1)
	lf := logFlags(fs)
	configFlag(fs) // flags from the file; a worker has no sinks
	tf := telemetryFlags(fs, "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := eng.validate(); err != nil {
		return err
	}
	logger, err := lf.logger()
	if err != nil {
		return err
	}
	obs, err := tf.start(ctx, "oncejob-worker", logger)
	if err != nil {
		return err
	}
	defer obs.stop()
	pipelines, err := eng.pipelines()
	if err != nil {
		return err
	}
	st, _, err := stf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	wait, err := eng.startWorkers(ctx, st, pipelines, obs, logger)
	if err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("worker shutting down")
	wait()
	return nil
}
