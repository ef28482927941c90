package relay_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/relay"
	"github.com/oncejob/oncejob/store"
)

// TestTenantEventsReachOnlyTheirSinks: two tenants, a sink each (and one
// pipeline-scoped sink): every event lands at its own tenant's receiver and
// never at the other's.
func TestTenantEventsReachOnlyTheirSinks(t *testing.T) {
	t.Parallel()
	st := newPG(t)
	secretA, refA := secretFile(t)
	secretB, refB := secretFile(t)
	inboxA, inboxB, inboxOther := newMemInbox(), newMemInbox(), newMemInbox()
	srvA := webhookReceiver(t, secretA, inboxA)
	srvB := webhookReceiver(t, secretB, inboxB)
	srvOther := webhookReceiver(t, secretA, inboxOther)
	scoped := webhookSink("a-other", "tenant-a", srvOther.URL, refA)
	scoped.Pipelines = []string{"other"}
	startRelay(t, relay.Config{Store: st, Sinks: []relay.SinkConfig{
		webhookSink("a-hook", "tenant-a", srvA.URL, refA),
		webhookSink("b-hook", "tenant-b", srvB.URL, refB),
		scoped,
	}})

	for range 5 {
		failJob(t, st, "tenant-a", "summarize")
		failJob(t, st, "tenant-b", "summarize")
	}
	failJob(t, st, "tenant-a", "other")
	failJob(t, st, "tenant-c", "summarize") // no sink: routed to nothing

	waitDelivered(t, st, "tenant-a", 7)
	waitDelivered(t, st, "tenant-b", 5)
	for _, e := range inboxA.events() {
		require.Equal(t, "tenant-a", e.Data.Tenant)
	}
	for _, e := range inboxB.events() {
		require.Equal(t, "tenant-b", e.Data.Tenant)
	}
	require.Equal(t, 6, inboxA.count())
	require.Equal(t, 5, inboxB.count())
	require.Equal(t, 1, inboxOther.count(), "the pipeline-scoped sink got only its pipeline's event")
	require.Equal(t, "other", inboxOther.events()[0].Data.Pipeline)
	require.Empty(t, deliveries(t, st, "tenant-c"))
}

// TestPrivateNetworkRefusedWithoutTheFlag: a sink pointing at loopback
// without allow_private_network never connects: the delivery is
// dead-lettered at once saying why, and the receiver sees nothing.
func TestPrivateNetworkRefusedWithoutTheFlag(t *testing.T) {
	t.Parallel()
	st := newPG(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	_, ref := secretFile(t)
	for _, url := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		sink := webhookSink("guarded", "acme", url, ref)
		sink.Webhook.AllowPrivateNetwork = false
		startRelay(t, relay.Config{Store: st, Sinks: []relay.SinkConfig{sink}})
		job := failJob(t, st, "acme", "summarize")
		var d *store.Delivery
		require.Eventually(t, func() bool {
			list, err := st.DeliveryList(t.Context(), &store.DeliveryListParams{Tenant: "acme", JobID: job.ID})
			require.NoError(t, err)
			if len(list.Deliveries) == 0 {
				return false
			}
			d = list.Deliveries[0]
			return d.Status == store.DeliveryStatusDeadLettered
		}, 60*time.Second, 10*time.Millisecond)
		require.Contains(t, d.LastError, "allow_private_network", url)
		require.EqualValues(t, 1, d.Attempts, "refused at once, no retries")
	}
	require.Zero(t, hits.Load(), "nothing reached the private address")
}
