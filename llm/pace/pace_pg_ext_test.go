package pace_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm/pace"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// TestADeadHoldersShareComesBack: on Postgres, on its clock, a process
// that holds 3 of 4 calls in flight and never draws again (SIGKILLed)
// keeps a live process to the 1 left until its hold expires; then the
// live process, bound by calls in flight, takes the whole limit without a
// call of its own ending (docs/architecture.md, "Provider limits").
func TestADeadHoldersShareComesBack(t *testing.T) {
	t.Parallel()
	st := storepgtest.NewTestStore(t)
	const ttl = time.Second
	dead, err := st.ProviderLimitDraw(t.Context(), &store.ProviderLimitDrawParams{
		Name: "default", Holder: "dead", CallsInFlight: 4, HoldTTL: ttl, Ask: []int64{1, 1, 1},
	})
	require.NoError(t, err)
	require.Equal(t, 3, dead.Granted)

	p, err := pace.New(pace.Config{Store: st, Holder: "alive", HoldTTL: ttl, MaxWait: time.Minute,
		Limits: map[string]pace.Limit{"default": {CallsInFlight: 4}}})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	first, err := p.Wait(ctx, pace.Call{Limit: "default", Tenant: "t"})
	require.NoError(t, err)
	tickets := make(chan *pace.Ticket, 3)
	for range 3 {
		go func() {
			tk, err := p.Wait(ctx, pace.Call{Limit: "default", Tenant: "t"})
			if err != nil {
				tk = nil
			}
			tickets <- tk
		}()
	}
	for range 3 {
		tk := <-tickets
		require.NotNil(t, tk, "granted once the dead holder's hold expired")
		defer tk.Done(nil, nil)
	}
	require.Equal(t, 4, p.Stats()[0].LocalCallsInFlight)
	require.Equal(t, 4, p.Stats()[0].CallsInFlight, "the dead holder's calls no longer count")
	first.Done(nil, nil)
}
