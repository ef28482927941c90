package relay_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/relay"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// schemaWrites is the rows inserted, updated and deleted in a schema's
// tables (pg_stat_user_tables), read once the schema's connections have
// exited and flushed their statistics (storepgtest.WaitIdle).
func schemaWrites(t *testing.T, conn *pgx.Conn, schema string) int64 {
	t.Helper()
	storepgtest.WaitIdle(t, schema)
	var n int64
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint
		FROM pg_stat_user_tables WHERE schemaname = $1`, schema).Scan(&n))
	return n
}

// outboxWrites is how many outbox rows were updated or deleted in schema.
func outboxWrites(t *testing.T, conn *pgx.Conn, schema string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT coalesce(sum(n_tup_upd + n_tup_del), 0)::bigint
		FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'outbox'`, schema).Scan(&n))
	return n
}

// TestRelayRowWritesPerEvent: a relay delivering events to a sink that
// honours an idempotency key (JetStream, webhook) writes at most two rows
// per delivered event - its routing queue row deleted, the delivery written
// once, delivered - measured in pg_stat_user_tables over the schema, none
// of them to the outbox itself (routing never writes the event's row:
// migration 0033); and each delivery's journal still shows the attempt
// that landed it.
func TestRelayRowWritesPerEvent(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"jetstream", "webhook"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			schemaURL := storepgtest.NewSchemaURL(t)
			u, err := url.Parse(schemaURL)
			require.NoError(t, err)
			schema := u.Query().Get("search_path")
			admin, err := pgx.Connect(ctx, storepgtest.DatabaseURL())
			require.NoError(t, err)
			t.Cleanup(func() { _ = admin.Close(context.Background()) })
			open := func() (*storepg.Store, *pgxpool.Pool) {
				pool, err := pgxpool.New(ctx, schemaURL)
				require.NoError(t, err)
				require.NoError(t, storepg.Migrate(ctx, pool))
				return storepg.New(pool), pool
			}

			const events = 50
			st, pool := open()
			for range events {
				failJob(t, st, "acme", "summarize")
			}
			st.Close() // its notifier, before the pool it sends on
			pool.Close()
			before := schemaWrites(t, admin, schema)
			outboxBefore := outboxWrites(t, admin, schema)

			st, pool = open()
			var sink relay.SinkConfig
			if kind == "jetstream" {
				sink, _, _ = jetStreamSink(t, "acme")
			} else {
				secret, ref := secretFile(t)
				sink = webhookSink("hook", "acme", webhookReceiver(t, secret, newMemInbox()).URL, ref)
			}
			r, err := relay.New(ctx, relay.Config{Store: st, Deliverer: delivererOf(st), Sinks: []relay.SinkConfig{sink}, PollInterval: 20 * time.Millisecond, ReconcileInterval: -1})
			require.NoError(t, err)
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = r.Run(rctx) }()
			ds := waitDelivered(t, st, "acme", events)
			cancel()
			<-done
			require.NoError(t, r.Close())
			for _, d := range ds {
				journal, err := st.DeliveryAttemptList(ctx, &store.DeliveryAttemptListParams{DeliveryID: d.ID})
				require.NoError(t, err)
				require.Len(t, journal, 1, "delivery %d", d.ID)
				require.Equal(t, store.DeliveryOutcomeDelivered, journal[0].Outcome)
				require.Equal(t, d.ExternalRef, journal[0].ExternalRef)
				require.Equal(t, r.Owner(), journal[0].Relay)
			}
			st.Close()
			pool.Close()
			writes := schemaWrites(t, admin, schema) - before
			perEvent := float64(writes) / events
			t.Logf("%s: %d row writes for %d events: %.2f per event", kind, writes, events, perEvent)
			require.LessOrEqual(t, perEvent, 2.0, fmt.Sprintf("%d row writes for %d events", writes, events))
			require.Equal(t, outboxBefore, outboxWrites(t, admin, schema), "routing wrote outbox rows")
		})
	}
}
