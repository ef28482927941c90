package main

import (
	"context"
	"flag"
	"log/slog"
	"time"

	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/schedule"
	"github.com/oncejob/oncejob/server/limits"
	"github.com/oncejob/oncejob/store"
)

// schedulerOpts are serve's scheduler flags. Schedulers run in serve, not
// in worker: firing a slot is a small control-plane write, and workers are
// scaled with the load of jobs, not with the number of schedules (see
// docs/architecture.md, "Schedules").
type schedulerOpts struct {
	enabled      bool
	lease        time.Duration
	pollInterval time.Duration
}

func schedulerFlags(fs *flag.FlagSet) *schedulerOpts {
	o := &schedulerOpts{}
	fs.BoolVar(&o.enabled, "scheduler", true, "fire the slots of schedules in this process (any number of serve processes share them by lease)")
	fs.DurationVar(&o.lease, "schedule-lease", 10*time.Second, "how long this process holds a due schedule; after it another process takes it over")
	fs.DurationVar(&o.pollInterval, "schedule-poll-interval", 250*time.Millisecond, "wait between looks for due schedules; a slot fires at most this late")
	return o
}

// startScheduler runs the scheduler until ctx ends; wait waits for it.
// A slot's job is held to the field rules and the tenant limits a direct
// submit is held to (lim, maxDoc, batches).
func (o *schedulerOpts) startScheduler(ctx context.Context, st store.ScheduleStore, pipelines *pipeline.Registry, lim *limits.Limits, maxDoc int, batches bool, logger *slog.Logger) (wait func(), err error) {
	if !o.enabled {
		return func() {}, nil
	}
	s, err := schedule.New(schedule.Config{
		Store:            st,
		Pipelines:        pipelines,
		MaxDocumentBytes: maxDoc,
		ProviderBatches:  batches,
		Admit:            lim.Admit,
		Lease:            o.lease,
		PollInterval:     o.pollInterval,
		Logger:           logger,
	})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	return func() { <-done }, nil
}
