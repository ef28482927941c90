package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/oncejob/oncejob/config"
	"github.com/oncejob/oncejob/relay"
	"github.com/oncejob/oncejob/server/readiness"
	"github.com/oncejob/oncejob/store"
)

// relayOpts are the relay flags shared by `serve` and `relay`.
type relayOpts struct {
	relays        int
	batchSize     int
	leaseDuration time.Duration
	pollInterval  time.Duration
	reconcile     time.Duration
	minRelays     int // the least --relays the command takes
}

// relayFlags declares the relay's flags: --relays is defaultRelays unless
// set, and at least minRelays (serve: 0, relay: 1).
func relayFlags(fs *flag.FlagSet, defaultRelays, minRelays int) *relayOpts {
	o := &relayOpts{minRelays: minRelays}
	fs.IntVar(&o.relays, "relays", defaultRelays, "relay loops delivering the outbox in this process (0: none)")
	fs.IntVar(&o.batchSize, "relay-batch-size", 100, "deliveries one relay loop claims at a time")
	fs.DurationVar(&o.leaseDuration, "relay-lease-duration", 30*time.Second, "how long a relay holds a claimed delivery; after it another relay takes it over")
	fs.DurationVar(&o.pollInterval, "relay-poll-interval", time.Second, "wait between rounds when no event arrives (events wake the relay at once)")
	fs.DurationVar(&o.reconcile, "relay-reconcile-interval", time.Minute, "how often the relay reconciles deliveries with the target systems (negative: never)")
	return o
}

// validate checks the flags once, before anything starts.
func (o *relayOpts) validate() error {
	switch {
	case o.relays >= o.minRelays:
		return nil
	case o.minRelays == 0:
		return errors.New("--relays must not be negative")
	}
	return fmt.Errorf("--relays must be at least %d", o.minRelays)
}

// relayStore is what a relay process needs of a store.
type relayStore interface {
	relay.Store
	store.WatchStore
	store.Store // the job of a delivery, for its trace
}

// startRelays runs the relay in the background until ctx is done; wait
// blocks until it stopped; health is the relay's Health (nil with no relay),
// for readiness. Committed events wake it: through wake when the
// caller already listens to the store's notifications (serve's watch hub,
// see wakeOnListen), else through a notification source of its own. The
// flags are valid (validate).
func (o *relayOpts) startRelays(ctx context.Context, st relayStore, caps storeCaps, cfg *config.File, wake chan struct{}, obs *observability, logger *slog.Logger) (wait func(), health func() error, err error) {
	if o.relays == 0 {
		return func() {}, nil, nil
	}
	var wg sync.WaitGroup
	if wake == nil {
		wake = make(chan struct{}, 1)
		notes, err := st.JobEventListen(ctx, &store.JobEventListenParams{Logger: logger})
		if err != nil {
			return nil, nil, err
		}
		wg.Go(func() {
			for range notes {
				poke(wake)
			}
		})
	}
	r, err := relay.New(ctx, relay.Config{
		Store: st, Deliverer: caps.deliverer, Sinks: cfg.Sinks, BatchSize: o.batchSize, Loops: o.relays,
		LeaseDuration: o.leaseDuration, PollInterval: o.pollInterval, ReconcileInterval: o.reconcile,
		Wake: wake, Logger: logger, Observer: obs.relayObserver(st),
	})
	if err != nil {
		return nil, nil, err
	}
	wg.Go(func() {
		defer func() { _ = r.Close() }()
		_ = r.Run(ctx)
	})
	logger.Info("relay running", "owner", r.Owner(), "loops", o.relays, "sinks", len(cfg.Sinks))
	return wg.Wait, r.Health, nil
}

// runRelay runs the relay only, beside any number of serve, worker and
// relay processes on one Postgres.
func runRelay(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	pf := processFlagsOf(fs, false, "and GET /readyz, GET /livez: ready while the store answers and the relay's rounds work")
	rel := relayFlags(fs, 1, 1)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := rel.validate(); err != nil {
		return err
	}
	p, err := pf.start(ctx, "oncejob-relay")
	if err != nil {
		return err
	}
	defer p.close()
	if err := p.open(ctx); err != nil {
		return err
	}
	wait, health, err := rel.startRelays(ctx, p.st, p.caps, p.cfg, nil, p.obs, p.logger)
	if err != nil {
		return err
	}
	// Readiness, on the --metrics-addr listener: the store answers and the
	// relay's rounds work (docs/operations.md, "Readiness").
	probe, err := readiness.New(readiness.Config{Store: p.st, WritePinger: p.caps.writePinger, Logger: p.logger})
	if err != nil {
		return err
	}
	probe.AddCheck(readiness.Check{Name: "relay", Err: health})
	go probe.Run(ctx)
	p.obs.mount(probe.Mount)
	<-ctx.Done()
	p.logger.Info("relay shutting down")
	wait()
	return nil
}

// poke wakes a relay without ever blocking: one pending wake-up is enough.
func poke(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

// wakeOnListen is the store as serve's watch hub sees it: every notification
// its JobEventListen delivers also wakes the relay, so a serve process keeps
// one LISTEN connection (docs/architecture.md, "Fan-out").
type wakeOnListen struct {
	store.WatchStore
	wake chan<- struct{}
}

// JobEventListen implements store.WatchStore.
func (w wakeOnListen) JobEventListen(ctx context.Context, params *store.JobEventListenParams) (<-chan store.JobEventNotification, error) {
	in, err := w.WatchStore.JobEventListen(ctx, params)
	if err != nil {
		return nil, err
	}
	out := make(chan store.JobEventNotification, cap(in))
	go func() {
		defer close(out)
		for n := range in {
			poke(w.wake)
			out <- n
		}
	}()
	return out, nil
}
