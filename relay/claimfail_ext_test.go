package relay_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/relay"
	"github.com/oncejob/oncejob/server/readiness"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/telemetry"
)

// brokenStore fails the relay's claims (or its routing) while told to, as
// the SQLite claim of issue 19 failed every round: the store answers pings
// all the while.
type brokenStore struct {
	testStore
	store.Pinger
	claim, route atomic.Pointer[error]
}

func (b *brokenStore) DeliveryClaim(ctx context.Context, p *store.DeliveryClaimParams) ([]*store.Delivery, error) {
	if err := b.claim.Load(); err != nil {
		return nil, *err
	}
	return b.testStore.DeliveryClaim(ctx, p)
}

func (b *brokenStore) OutboxRoute(ctx context.Context, p *store.OutboxRouteParams) (int, error) {
	if err := b.route.Load(); err != nil {
		return 0, *err
	}
	return b.testStore.OutboxRoute(ctx, p)
}

// TestRelayThatCannotClaimIsVisible: a relay whose claims fail counts each
// failed round in oncejob_relay_round_failures_total{step="claim"}, and
// readiness - the probe with the relay's Health as a check - goes down
// with the store's error in /readyz, while the store itself answers; once
// the claims work again the events go out and readiness comes back. A
// failing route is counted under its own step.
func TestRelayThatCannotClaimIsVisible(t *testing.T) {
	t.Parallel()
	sqlite := newSQLite(t)
	st := &brokenStore{testStore: sqlite, Pinger: sqlite.(store.Pinger)}
	claimErr := errors.New("storesqlite: datatype mismatch (20)")
	st.claim.Store(&claimErr)

	key, secret := secretFile(t)
	inbox := newMemInbox()
	hook := webhookReceiver(t, key, inbox)
	m := telemetry.NewMetrics()
	r := startRelay(t, relay.Config{
		Store:    st,
		Sinks:    []relay.SinkConfig{webhookSink("hook-1", "tenant-a", hook.URL, secret), webhookSink("hook-2", "tenant-a", hook.URL, secret)},
		Observer: &telemetry.RelayObserver{Metrics: m},
	})
	probe, err := readiness.New(readiness.Config{Store: st})
	require.NoError(t, err)
	probe.AddCheck(readiness.Check{Name: "relay", Err: r.Health})
	metrics := httptest.NewServer(m.Handler())
	t.Cleanup(metrics.Close)

	failThenSucceed(t, st, "tenant-a")

	rounds := r.TestSignals().Round
	for range 3 { // three rounds whose claim failed, each counted before it signals
		_, err := rounds.WaitFor(func(err error) bool { return errors.Is(err, claimErr) })
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, failures(t, metrics.URL, "claim"), 3)
	err = probe.Check(t.Context())
	require.ErrorIs(t, err, claimErr)
	require.False(t, probe.Ready())
	code, body := readyz(t, probe)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "not ready: relay: claim failed in every round since ")
	require.Contains(t, body, claimErr.Error())
	require.Zero(t, inbox.count(), "nothing delivered while the claims fail")
	require.Zero(t, failures(t, metrics.URL, "route"))

	st.claim.Store(nil)
	waitDelivered(t, st, "tenant-a", 4) // two events, two sinks
	_, err = rounds.WaitFor(func(err error) bool { return err == nil })
	require.NoError(t, err)
	require.NoError(t, r.Health())
	require.NoError(t, probe.Check(t.Context()))
	code, body = readyz(t, probe)
	require.Equal(t, http.StatusOK, code, body)

	routeErr := errors.New("routing refused")
	st.route.Store(&routeErr)
	_, err = rounds.WaitFor(func(err error) bool { return errors.Is(err, routeErr) })
	require.NoError(t, err)
	require.GreaterOrEqual(t, failures(t, metrics.URL, "route"), 1)
	require.ErrorIs(t, r.Health(), routeErr)
	require.ErrorContains(t, r.Health(), "route failed in every round since ")
}

// failures reads oncejob_relay_round_failures_total{step} from a scrape.
func failures(t *testing.T, url, step string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	prefix := `oncejob_relay_round_failures_total{step="` + step + `"} `
	for line := range strings.Lines(string(page)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			var n int
			for _, c := range v {
				require.True(t, c >= '0' && c <= '9', "not a count: %q", line)
				n = n*10 + int(c-'0')
			}
			return n
		}
	}
	return 0
}

func readyz(t *testing.T, p *readiness.Probe) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	p.ReadyzHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return rec.Code, rec.Body.String()
}
