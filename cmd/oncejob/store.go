package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/oncejob/oncejob/relay"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storesqlite"
	"github.com/oncejob/oncejob/worker"
)

// appStore is everything the server, the workers and the watch hub need.
// Both stores implement it; only this command chooses one.
type appStore interface {
	worker.Store
	store.OperatorStore
	store.WatchStore
	relay.Store
	store.Pinger
	store.ConnectionCounter
	store.ViewStore
	store.RunStore
	store.ProviderBatchStore
	store.ScheduleStore
	store.APIKeyStore
	store.UsageStore
	store.StatsStore
	store.SecretStore
}

var (
	_ appStore = (*storepg.Store)(nil)
	_ appStore = (*storesqlite.Store)(nil)
)

// storeCaps is what only some stores can do, chosen here, once, where the
// store is: a nil field is a store that cannot. No other package looks for
// a capability at run time.
type storeCaps struct {
	// deliverer routes and delivers at once (relay.Config.Deliverer):
	// Postgres. The embedded store's one writer would wait for the sends.
	deliverer store.OutboxDeliverer
	// writePinger commits a write for readiness
	// (readiness.Config.WritePinger): Postgres, whose commits can wait
	// for a lost synchronous standby.
	writePinger store.WritePinger
}

// storeOpts are the flags that choose and prepare the store.
type storeOpts struct {
	databaseURL string
	dataDir     string // only with embedded
	migrate     bool
	embedded    bool // the command may run on the embedded store
	// existing: the embedded store must exist already; the command
	// refuses to create an empty one (`oncejob keys`).
	existing bool
}

// storeFlags declares --database-url and --migrate, and --data-dir when the
// command may run on the embedded store (serve: one process holds it);
// commands that run beside others need Postgres.
func storeFlags(fs *flag.FlagSet, embedded bool) *storeOpts {
	o := &storeOpts{embedded: embedded}
	urlHelp := "Postgres URL, e.g. postgres://user@host:5432/db (required)"
	if embedded {
		urlHelp = "Postgres URL, e.g. postgres://user@host:5432/db; empty: the embedded SQLite store in --data-dir"
		fs.StringVar(&o.dataDir, "data-dir", "./oncejob-data", "directory of the embedded store, when --database-url is empty")
	}
	fs.StringVar(&o.databaseURL, "database-url", "", urlHelp)
	fs.BoolVar(&o.migrate, "migrate", false, "Postgres: apply the embedded migrations before starting (the embedded store always migrates itself)")
	return o
}

// open opens the store the flags name, ready to use: on Postgres it applies
// the migrations when --migrate is set, and then checks that the database
// has exactly this binary's migrations, so a process started against an
// older or newer schema stops here, naming the difference, instead of
// failing later in a query. The embedded store migrates itself on open and
// refuses a data directory migrated by a newer binary. caps are what only
// the chosen store can do; where says which store, for the start banner.
func (o *storeOpts) open(ctx context.Context) (st appStore, caps storeCaps, where string, err error) {
	if o.databaseURL == "" {
		if !o.embedded {
			return nil, storeCaps{}, "", errors.New("--database-url (or ONCEJOB_DATABASE_URL) is required")
		}
		abs, _ := filepath.Abs(o.dataDir)
		if o.existing {
			ok, err := storesqlite.Exists(o.dataDir)
			if err != nil {
				return nil, storeCaps{}, "", err
			}
			if !ok {
				return nil, storeCaps{}, "", fmt.Errorf("no embedded store in %s: pass --database-url (or ONCEJOB_DATABASE_URL) for Postgres, or --data-dir of the store `oncejob serve` made", abs)
			}
		}
		s, err := storesqlite.Open(ctx, storesqlite.Config{DataDir: o.dataDir})
		if err != nil {
			return nil, storeCaps{}, "", err
		}
		return s, storeCaps{}, "embedded SQLite in " + abs, nil
	}
	s, err := storepg.Open(ctx, o.databaseURL)
	if err != nil {
		return nil, storeCaps{}, "", fmt.Errorf("open database: %w", err)
	}
	if o.migrate {
		if err := storepg.Migrate(ctx, s.Pool()); err != nil {
			s.Close()
			return nil, storeCaps{}, "", err
		}
	}
	if err := s.MigrationValidate(ctx); err != nil {
		s.Close()
		return nil, storeCaps{}, "", err
	}
	return s, storeCaps{deliverer: s, writePinger: s}, "Postgres", nil
}
