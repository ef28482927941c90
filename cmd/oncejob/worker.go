package main

import (
	"context"
	"flag"
)

// runWorker runs workers only: no gRPC, any number of them beside `serve`
// processes on one Postgres.
func runWorker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	pf := processFlagsOf(fs, false, "") // the config file sets flags; a worker has no sinks
	eng := engineFlags(fs, 1)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := eng.validate(); err != nil {
		return err
	}
	p, err := pf.start(ctx, "oncejob-worker")
	if err != nil {
		return err
	}
	defer p.close()
	pipelines, err := eng.pipelines()
	if err != nil {
		return err
	}
	if err := p.open(ctx); err != nil {
		return err
	}
	wait, err := eng.startWorkers(ctx, p.st, pipelines, p.obs, p.logger)
	if err != nil {
		return err
	}
	<-ctx.Done()
	p.logger.Info("worker shutting down")
	wait()
	return nil
}
