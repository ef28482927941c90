package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// accountRelay is the relayed event's account (issue 33): the events the
// light account's jobs left in the outbox (each job's job.succeeded, and
// those of the history and warmup jobs that no relay routed) are routed by
// one `oncejob relay` process, as the measured role, to a JetStream stream
// of the bench's, from pg_stat_statements reset just before the relay starts
// to the last delivery delivered; per event. The relay of the tree measured
// runs (a -before tree's binary for its account), so a change to the
// routing's statements or schema shows in one run.
func (e *engineBench) accountRelay(ctx context.Context, pool *pgxpool.Pool) (account, error) {
	c := e.c
	nc, err := nats.Connect(c.natsURL)
	if err != nil {
		return account{}, fmt.Errorf("the relayed event's account needs NATS (-nats %q): %w", c.natsURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return account{}, err
	}
	suffix := fmt.Sprintf("%d_%d", os.Getpid(), time.Now().UnixNano())
	stream, prefix := "BENCH_ACCOUNT_"+suffix, "benchaccount"+suffix
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"}, Duplicates: 2 * time.Minute}); err != nil {
		return account{}, err
	}
	defer func() { _ = js.DeleteStream(context.WithoutCancel(ctx), stream) }()
	cfgPath := filepath.Join(e.tmp, "relay-account.yaml")
	doc := fmt.Sprintf("sinks:\n  - name: bench\n    tenant: default\n    events: [job.succeeded]\n    jetstream: {url: '%s', stream: %s, subject_prefix: %s}\n", c.natsURL, stream, prefix)
	if err := os.WriteFile(cfgPath, []byte(doc), 0o600); err != nil {
		return account{}, err
	}

	// Unrouted events: the outbox's routed_at before migration 0033, its
	// queue outbox_unrouted after.
	unroutedQ := `SELECT count(*) FROM outbox_unrouted`
	var queue bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('outbox_unrouted') IS NOT NULL`).Scan(&queue); err != nil {
		return account{}, err
	}
	if !queue {
		unroutedQ = `SELECT count(*) FROM outbox WHERE routed_at IS NULL`
	}
	var events, delivered0 int64
	if err := pool.QueryRow(ctx, unroutedQ).Scan(&events); err != nil {
		return account{}, err
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM deliveries`).Scan(&delivered0); err != nil {
		return account{}, err
	}
	if events == 0 {
		return account{}, fmt.Errorf("no unrouted event in the outbox after the light account")
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		return account{}, err
	}
	walBefore, err := e.accountReset(ctx)
	if err != nil {
		return account{}, err
	}
	logf("account-relay: %d events routed by one `oncejob relay` to JetStream (%s)", events, c.natsURL)
	pg0 := e.pgCPU(ctx)
	t0 := time.Now()
	r, err := startProc(ctx, "relay", filepath.Join(e.tmp, "relay-account.log"), e.bin, "relay",
		"--database-url", e.appURL(c.db), "--config", cfgPath, "--relay-reconcile-interval", "-1s",
		"--log-level", c.logLevel)
	if err != nil {
		return account{}, err
	}
	defer r.stop()
	if err := e.waitRelayed(ctx, pool, r, unroutedQ, events, delivered0); err != nil {
		return account{}, err
	}
	elapsed := time.Since(t0)
	r.stop()
	time.Sleep(200 * time.Millisecond) // the relay's backends exit, into the postmaster's cutime
	info, err := js.Stream(ctx, stream)
	if err != nil {
		return account{}, err
	}
	if st, _ := info.Info(ctx); st != nil && st.State.Msgs != uint64(events) {
		return account{}, fmt.Errorf("the stream holds %d messages, %d events were routed", st.State.Msgs, events)
	}
	a, err := e.readAccount(ctx, "oncejob relayed event (JetStream)"+e.suffix(), c.db, int(events), walBefore)
	a.elapsed, a.pgCPU = elapsed, e.pgCPU(ctx)-pg0
	return a, err
}

// waitRelayed waits until the relay r has routed every event (unroutedQ
// counts none) and delivered events more deliveries than delivered0.
func (e *engineBench) waitRelayed(ctx context.Context, pool *pgxpool.Pool, r *proc, unroutedQ string, events, delivered0 int64) error {
	c := e.c
	deadline := time.Now().Add(c.phaseTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var unrouted, delivered, pending int64
		if err := pool.QueryRow(ctx, unroutedQ).Scan(&unrouted); err != nil {
			return err
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'delivered'), count(*) FILTER (WHERE status <> 'delivered') FROM deliveries`).
			Scan(&delivered, &pending); err != nil {
			return err
		}
		if unrouted == 0 && delivered-delivered0 == events {
			return nil
		}
		if r.exited() {
			return fmt.Errorf("relay exited: %s", r.tail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %d unrouted, %d of %d delivered, %d not delivered", c.phaseTimeout, unrouted, delivered-delivered0, events, pending)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
