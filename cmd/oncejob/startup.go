package main

import (
	"context"
	"flag"
	"log/slog"

	"github.com/oncejob/oncejob/config"
)

// The start-up serve, worker and relay share: the flags of a process that
// runs on a store (--log-level, --config, --metrics-addr and the store's),
// then, in two steps so a command checks what is cheap to check before
// it opens the store, start (the logger, the telemetry) and open (the
// config file, the store). reconcile, migrate and keys start otherwise:
// no logger, no telemetry.

// processFlags are the flags every process on a store declares.
type processFlags struct {
	store     *storeOpts
	log       *logOpts
	cfgPath   *string
	telemetry *telemetryOpts
}

// processFlagsOf declares them on fs: embedded, the command may run on the
// embedded store (storeFlags); metricsAlso, what --metrics-addr serves
// beside the metrics (telemetryFlags).
func processFlagsOf(fs *flag.FlagSet, embedded bool, metricsAlso string) *processFlags {
	return &processFlags{
		store:     storeFlags(fs, embedded),
		log:       logFlags(fs),
		cfgPath:   configFlag(fs),
		telemetry: telemetryFlags(fs, metricsAlso),
	}
}

// process is a command's start-up as far as it went.
type process struct {
	flags  *processFlags
	logger *slog.Logger
	obs    *observability
	cfg    *config.File // set by open
	st     appStore     // set by open
	caps   storeCaps    // what only st can do; set by open
	where  string       // which store, for the start banner; set by open
}

// start makes the logger and starts the telemetry, service naming the
// process in traces. The caller defers close.
func (f *processFlags) start(ctx context.Context, service string) (*process, error) {
	logger, err := f.log.logger()
	if err != nil {
		return nil, err
	}
	obs, err := f.telemetry.start(ctx, service, logger)
	if err != nil {
		return nil, err
	}
	return &process{flags: f, logger: logger, obs: obs}, nil
}

// open reads the config file and opens the store.
func (p *process) open(ctx context.Context) error {
	cfg, err := config.Load(*p.flags.cfgPath)
	if err != nil {
		return err
	}
	st, caps, where, err := p.flags.store.open(ctx)
	if err != nil {
		return err
	}
	p.cfg, p.st, p.caps, p.where = cfg, st, caps, where
	return nil
}

// close closes the store, if open, then stops the telemetry.
func (p *process) close() {
	if p.st != nil {
		p.st.Close()
	}
	p.obs.stop()
}
