package relay_test

import (
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/clientsdk/receiver"
	"github.com/oncejob/oncejob/relay"
	"github.com/oncejob/oncejob/retry"
	"github.com/oncejob/oncejob/store"
)

// TestWebhookAppliesOnceInOrder: on both stores, two relays deliver the
// events of many jobs to a real receiver: each applied once, each job's in
// the order it announced them.
func TestWebhookAppliesOnceInOrder(t *testing.T) {
	for name, open := range map[string]func(*testing.T) testStore{"postgres": newPG, "sqlite": newSQLite} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := open(t)
			secret, ref := secretFile(t)
			inbox := newMemInbox()
			srv := webhookReceiver(t, secret, inbox)
			sinks := []relay.SinkConfig{webhookSink("hook", "acme", srv.URL, ref)}
			startRelay(t, relay.Config{Store: st, Sinks: sinks, BatchSize: 7})
			startRelay(t, relay.Config{Store: st, Sinks: sinks, BatchSize: 7})

			const jobs = 30
			for range jobs {
				failThenSucceed(t, st, "acme")
			}
			ds := waitDelivered(t, st, "acme", 2*jobs)
			require.Equal(t, 2*jobs, inbox.count())
			for id, n := range inbox.applied {
				require.Equal(t, 1, n, "event %s applied %d times", id, n)
			}
			seen := map[string][]string{}
			for _, e := range inbox.events() {
				seen[e.Data.JobID] = append(seen[e.Data.JobID], e.Type)
			}
			for job, types := range seen {
				require.Equal(t, []string{"job.failed", "job.succeeded"}, types, "job %s", job)
			}
			for _, d := range ds {
				require.Equal(t, "r-"+d.EventID, d.ExternalRef, "the receiver's receipt is the external reference")
			}
		})
	}
}

// TestWebhookRetriesThenDeadLettersAndRetryBringsItHome: the receiver first
// refuses connections, then answers 503 with Retry-After, then 200:
// everything arrives, and no attempt comes sooner than Retry-After asked or
// later than the backoff allows. A delivery whose budget runs out while the
// receiver is down is dead-lettered, and RetryDelivery brings it home.
func TestWebhookRetriesThenDeadLettersAndRetryBringsItHome(t *testing.T) {
	t.Parallel()
	st := newPG(t)
	secret, ref := secretFile(t)

	// A port with nobody listening: connections are refused.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	require.NoError(t, lis.Close())

	// Attempts enough for the refused ones, however long a loaded machine
	// takes to dead-letter the hasty sink's before the receiver starts.
	policy := relay.RetryPolicy{Policy: retry.Policy{MaxAttempts: 1000, InitialBackoff: 40 * time.Millisecond, MaxBackoff: 160 * time.Millisecond}, MaxAge: time.Minute}
	patient := webhookSink("patient", "acme", "http://"+addr, ref, "job.failed")
	patient.Retry = policy
	hasty := webhookSink("hasty", "acme", "http://"+addr, ref, "job.failed")
	hasty.Retry = relay.RetryPolicy{Policy: retry.Policy{MaxAttempts: 2, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}, MaxAge: time.Minute}
	startRelay(t, relay.Config{Store: st, Sinks: []relay.SinkConfig{patient, hasty}})

	const events = 3
	for range events {
		failJob(t, st, "acme", "summarize")
	}
	// The hasty sink spends its two attempts on refused connections.
	require.Eventually(t, func() bool {
		n := 0
		for _, d := range deliveries(t, st, "acme") {
			if d.Sink == "hasty" && d.Status == store.DeliveryStatusDeadLettered {
				n++
			}
		}
		return n == events
	}, 60*time.Second, 10*time.Millisecond)

	// Let the patient sink fail on refused connections a few times, then
	// answer 503 with Retry-After: 1 twice per event, then 200.
	time.Sleep(150 * time.Millisecond)
	inbox := newMemInbox()
	v, err := receiver.NewVerifier(secret)
	require.NoError(t, err)
	var unavailable atomic.Int32
	handler := receiver.NewHandler(v, inbox)
	lis, err = net.Listen("tcp", addr)
	require.NoError(t, err, "the refused port was taken meanwhile")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unavailable.Add(1) <= 2*events {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		handler.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })

	require.Eventually(t, func() bool { return inbox.count() == events }, 60*time.Second, 10*time.Millisecond)
	for _, d := range deliveries(t, st, "acme") {
		if d.Sink != "patient" {
			continue
		}
		require.Eventually(t, func() bool {
			list, err := st.DeliveryList(t.Context(), &store.DeliveryListParams{Tenant: "acme", JobID: d.JobID, Sink: "patient"})
			require.NoError(t, err)
			return list.Deliveries[0].Status == store.DeliveryStatusDelivered
		}, 60*time.Second, 10*time.Millisecond)
		journal, err := st.DeliveryAttemptList(t.Context(), &store.DeliveryAttemptListParams{DeliveryID: d.ID})
		require.NoError(t, err)
		requireBackoff(t, policy, journal)
	}

	// The dead letters stay dead until RetryDelivery; then they land. Both
	// sinks point at one receiver, which applied each event once already:
	// it answers 2xx and applies nothing again.
	time.Sleep(200 * time.Millisecond)
	for _, d := range deliveries(t, st, "acme") {
		if d.Sink == "hasty" {
			require.Equal(t, store.DeliveryStatusDeadLettered, d.Status)
		}
	}
	res, err := st.DeliveryRetry(t.Context(), &store.DeliveryRetryParams{Tenant: "acme", Sink: "hasty"})
	require.NoError(t, err)
	require.Len(t, res.Deliveries, events)
	waitDelivered(t, st, "acme", 2*events)
	require.Equal(t, events, inbox.count(), "applied once per event")
}

// requireBackoff checks a delivery's journal against the policy: refused
// connections are failed attempts; a 503 with Retry-After: 1 is never
// followed sooner than a second later. (That the waits stay under the
// full-jitter ceiling is TestBackoffIsFullJitterUnderItsCeiling's, on the
// computed waits: an upper bound on a shared machine's clock flakes.)
func requireBackoff(t *testing.T, p relay.RetryPolicy, journal []*store.DeliveryAttempt) {
	t.Helper()
	require.GreaterOrEqual(t, len(journal), 4, "refused, 503, 503, delivered at least")
	last := journal[len(journal)-1]
	require.Equal(t, store.DeliveryOutcomeDelivered, last.Outcome)
	var refused, unavailable int
	for i := 1; i < len(journal); i++ {
		prev, cur := journal[i-1], journal[i]
		gap := cur.StartedAt.Sub(prev.FinishedAt)
		switch prev.HTTPStatus {
		case http.StatusServiceUnavailable:
			unavailable++
			require.GreaterOrEqual(t, gap, 990*time.Millisecond, "attempt %d came %s after a Retry-After: 1", cur.Attempt, gap)
		default:
			require.Equal(t, store.DeliveryOutcomeFailed, prev.Outcome)
			require.True(t, strings.Contains(prev.Error, "refused"), prev.Error)
			refused++
		}
	}
	require.Positive(t, refused)
	require.Equal(t, 2, unavailable)
}

// TestWebhookSignsWithBothSecretsWhileRotating: a sink rotating its secret
// signs with the new and the previous one; a receiver that still knows only
// the previous one accepts.
func TestWebhookSignsWithBothSecretsWhileRotating(t *testing.T) {
	t.Parallel()
	st := newPG(t)
	oldSecret, oldRef := secretFile(t)
	_, newRef := secretFile(t)
	inbox := newMemInbox()
	srv := webhookReceiver(t, oldSecret, inbox)
	sink := webhookSink("hook", "acme", srv.URL, newRef)
	sink.Webhook.PreviousSecret = &oldRef
	startRelay(t, relay.Config{Store: st, Sinks: []relay.SinkConfig{sink}})
	failJob(t, st, "acme", "summarize")
	waitDelivered(t, st, "acme", 1)
	require.Equal(t, 1, inbox.count())
}
