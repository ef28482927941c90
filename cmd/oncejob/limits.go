package main

import (
	"flag"
	"log/slog"

	"github.com/oncejob/oncejob/config"
	"github.com/oncejob/oncejob/server/limits"
	"github.com/oncejob/oncejob/store"
)

// limitFlags are the per-tenant limits every tenant gets; the config
// file's `limits:` section overrides them and names tenants' own. Zero is
// no limit; a server starts with the watch-stream limits only
// (docs/operations.md, "Limits").
func limitFlags(fs *flag.FlagSet) *limits.Tenant {
	t := &limits.Tenant{}
	fs.Float64Var(&t.SubmitRate, "limit-submit-rate", 0, "per tenant: submissions a second (SubmitJobs counts each item), per serve process; 0: no limit")
	fs.IntVar(&t.SubmitBurst, "limit-submit-burst", 0, "per tenant: submissions at once above the rate; 0: the rate rounded up")
	fs.Int64Var(&t.JobsInFlight, "limit-jobs-in-flight", 0, "per tenant: jobs not finished (queued, running, waiting); 0: no limit")
	fs.IntVar(&t.WatchStreams, "limit-watch-streams", DefaultWatchStreams, "per tenant: watch streams open at once, per serve process; 0: no limit")
	fs.IntVar(&t.WatchStreamsPerKey, "limit-watch-streams-per-key", DefaultWatchStreamsPerKey, "per API key: watch streams open at once, per serve process; 0: no limit")
	fs.Int64Var(&t.DocumentBytesPerDay, "limit-document-bytes-per-day", 0, "per tenant: document bytes of the jobs created in a UTC day; 0: no limit")
	fs.IntVar(&t.StoreCalls, "limit-store-calls", AutoStoreCalls, "per tenant: calls at once in the job store (SubmitJob aside), per serve process; -1: half the store's connections (Postgres pool_max_conns, embedded: its read connections), at least 1; 0: no limit")
	return t
}

// AutoStoreCalls is --limit-store-calls' default: half the store's
// connections, at least 1, so one tenant leaves the other half to the
// others (docs/operations.md, "Limits").
const AutoStoreCalls = -1

// Defaults of the watch-stream limits: a stream holds at most a bounded
// batch (the memory budget counts it), so these bound the goroutines and
// connections one tenant or key can pin.
const (
	DefaultWatchStreams       = 256
	DefaultWatchStreamsPerKey = 64
)

// newLimits makes the server's limits from the flags and the config file.
// connections is how many the store holds at most (store.ConnectionCounter).
func newLimits(flags *limits.Tenant, cfg *config.File, usage store.UsageStore, connections int, logger *slog.Logger) (*limits.Limits, error) {
	def := *flags
	if def.StoreCalls == AutoStoreCalls {
		def.StoreCalls = max(1, connections/2)
	}
	return limits.New(limits.Config{Default: def, Section: cfg.Limits, Usage: usage, Logger: logger})
}
