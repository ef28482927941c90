package relay_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/relay"
	"github.com/oncejob/oncejob/store"
)

// jetStreamSink returns a sink on a stream of this test's own (deleted at
// the end) and the stream's handle.
func jetStreamSink(t *testing.T, tenant string) (relay.SinkConfig, jetstream.JetStream, string) {
	t.Helper()
	nc, err := nats.Connect(nats.DefaultURL, nats.Timeout(2*time.Second))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("NATS with JetStream on %s: %v", nats.DefaultURL, err)
		}
		t.Skipf("SKIP: no NATS on %s (%v); install nats-server and run it with -js", nats.DefaultURL, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	suffix := hex.EncodeToString(b)
	stream := "ONCEJOB_TEST_" + suffix
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
	return relay.SinkConfig{
		Name: "stream", Tenant: tenant, Events: relay.EventTypes,
		JetStream: &relay.JetStreamConfig{URL: nats.DefaultURL, Stream: stream, SubjectPrefix: "t" + suffix, CreateStream: true, DuplicateWindow: time.Minute},
	}, js, stream
}

func streamMsgs(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(t.Context(), stream)
	require.NoError(t, err)
	info, err := s.Info(t.Context())
	require.NoError(t, err)
	return info.State.Msgs
}

// TestJetStreamStoresAnEventOnce: every event is published with its id as
// Nats-Msg-Id; publishing each one again (a redelivery) is acknowledged as
// a duplicate, and the stream still holds each event once.
func TestJetStreamStoresAnEventOnce(t *testing.T) {
	t.Parallel()
	st := newPG(t)
	sink, js, stream := jetStreamSink(t, "acme")
	startRelay(t, relay.Config{Store: st, Sinks: []relay.SinkConfig{sink}})
	const events = 10
	for range events {
		failJob(t, st, "acme", "summarize")
	}
	ds := waitDelivered(t, st, "acme", events)
	require.EqualValues(t, events, streamMsgs(t, js, stream))
	for _, d := range ds {
		require.Regexp(t, "^"+stream+`:\d+$`, d.ExternalRef)
		_, err := st.DeliveryRetry(t.Context(), &store.DeliveryRetryParams{Tenant: "acme", ID: d.ID, Redeliver: true})
		require.NoError(t, err)
	}
	waitDelivered(t, st, "acme", events)
	require.EqualValues(t, events, streamMsgs(t, js, stream), "published twice, stored once")
	for _, d := range ds {
		journal, err := st.DeliveryAttemptList(t.Context(), &store.DeliveryAttemptListParams{DeliveryID: d.ID})
		require.NoError(t, err)
		require.Len(t, journal, 2)
		require.False(t, journal[0].Duplicate)
		require.True(t, journal[1].Duplicate, "the stream said it had the event")
		require.Equal(t, journal[0].ExternalRef, journal[1].ExternalRef, "the same stream sequence")
	}
	// The subject names the tenant and the event type.
	s, err := js.Stream(t.Context(), stream)
	require.NoError(t, err)
	msg, err := s.GetMsg(t.Context(), 1)
	require.NoError(t, err)
	require.Equal(t, relay.Subject(sink.JetStream.SubjectPrefix, "acme", "job.failed"), msg.Subject)
}

// TestReconcileRepublishesWhatTheStreamLost: the journal says delivered,
// the stream was lost (deleted and made anew): reconciliation finds each
// event missing, queues it again under its id, the relay publishes it, and
// the next reconciliation finds nothing off.
func TestReconcileRepublishesWhatTheStreamLost(t *testing.T) {
	t.Parallel()
	st := newPG(t)
	sink, js, stream := jetStreamSink(t, "acme")
	startRelay(t, relay.Config{Store: st, Sinks: []relay.SinkConfig{sink}})
	const events = 5
	for range events {
		failJob(t, st, "acme", "summarize")
	}
	waitDelivered(t, st, "acme", events)

	sinks, err := relay.OpenSinks(t.Context(), []relay.SinkConfig{sink}, st)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sinks.Close() })
	report, err := relay.Reconcile(t.Context(), st, sinks, relay.ReconcileOptions{})
	require.NoError(t, err)
	require.True(t, report.OK(), report.Summary())
	require.Equal(t, events, report.Checked)

	require.NoError(t, js.DeleteStream(t.Context(), stream))
	_, err = js.CreateStream(t.Context(), jetstream.StreamConfig{Name: stream, Subjects: []string{sink.JetStream.SubjectPrefix + ".>"}, Duplicates: time.Minute})
	require.NoError(t, err)

	report, err = relay.Reconcile(t.Context(), st, sinks, relay.ReconcileOptions{})
	require.NoError(t, err)
	require.False(t, report.OK())
	require.Len(t, report.Lost, events)
	require.Equal(t, events, report.Requeued)

	waitDelivered(t, st, "acme", events)
	require.EqualValues(t, events, streamMsgs(t, js, stream))
	report, err = relay.Reconcile(t.Context(), st, sinks, relay.ReconcileOptions{})
	require.NoError(t, err)
	require.True(t, report.OK(), report.Summary())
}
