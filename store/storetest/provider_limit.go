package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// exerciseProviderLimit is the conformance suite of
// store.ProviderLimitStore. Draws run at explicit times, so every grant is
// exact.
func exerciseProviderLimit(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
	type bundle struct {
		s    Store
		name string
	}
	setup := func(t *testing.T) *bundle {
		return &bundle{s: newStore(t), name: "limit-" + newUUID(t)}
	}
	draw := func(t *testing.T, b *bundle, p store.ProviderLimitDrawParams) *store.ProviderLimitDrawResult {
		t.Helper()
		p.Name = b.name
		if p.Holder == "" {
			p.Holder = "holder-a"
		}
		if p.HoldTTL == 0 {
			p.HoldTTL = 10 * time.Second
		}
		res, err := b.s.ProviderLimitDraw(t.Context(), &p)
		require.NoError(t, err)
		return res
	}
	requireTime := func(t *testing.T, want time.Time, got time.Time) {
		t.Helper()
		require.WithinDuration(t, want, got, time.Millisecond)
	}

	t.Run("RequestsGrantTheBurstThenPaceAtTheRate", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := store.ProviderLimitDrawParams{RequestsPerSecond: 10, RequestBurst: 2, Now: at(0), Ask: []int64{1, 1, 1}}
		res := draw(t, b, req)
		require.Equal(t, 2, res.Granted)
		requireTime(t, t0.Add(100*time.Millisecond), res.NextAt)
		require.Equal(t, 2, res.CallsInFlight)
		req.Now, req.Calls, req.Ask = at(100*time.Millisecond), 2, []int64{1, 1}
		res = draw(t, b, req)
		require.Equal(t, 1, res.Granted, "one more a tenth of a second later")
		requireTime(t, t0.Add(200*time.Millisecond), res.NextAt)
		require.Equal(t, 3, res.CallsInFlight)
		req.Now, req.Calls, req.Ask = at(time.Hour), 0, []int64{1, 1, 1}
		require.Equal(t, 2, draw(t, b, req).Granted, "an idle bucket holds no more than its burst")
	})

	t.Run("TokensReservedAndSettled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := store.ProviderLimitDrawParams{TokensPerSecond: 100, TokenBurst: 100, Now: at(0), Ask: []int64{60, 60}}
		res := draw(t, b, req)
		require.Equal(t, 1, res.Granted)
		requireTime(t, t0.Add(200*time.Millisecond), res.NextAt)
		// The call used 20 of its 60: 40 go back, and the next 60 fit.
		req.Calls, req.ReturnTokens, req.Ask = 0, 40, []int64{60}
		require.Equal(t, 1, draw(t, b, req).Granted)
		// It used 90: 30 more are taken. 20 + 90 are owed, 10 beyond the
		// burst, so 30 more fit 0.4 s later.
		req.Calls, req.ReturnTokens, req.Ask = 0, -30, []int64{30}
		res = draw(t, b, req)
		require.Zero(t, res.Granted)
		requireTime(t, t0.Add(400*time.Millisecond), res.NextAt)
	})

	t.Run("ACallLargerThanTheBurstPassesAWholeBucket", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := store.ProviderLimitDrawParams{TokensPerSecond: 100, TokenBurst: 100, Now: at(0), Ask: []int64{500, 1}}
		res := draw(t, b, req)
		require.Equal(t, 1, res.Granted)
		requireTime(t, t0.Add(4010*time.Millisecond), res.NextAt)
	})

	t.Run("CallsInFlightAcrossHoldersAndTheirExpiry", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := store.ProviderLimitDrawParams{Holder: "a", CallsInFlight: 3, HoldTTL: 5 * time.Second, Now: at(0), Ask: []int64{1, 1}}
		require.Equal(t, 2, draw(t, b, a).Granted)
		other := store.ProviderLimitDrawParams{Holder: "b", CallsInFlight: 3, HoldTTL: 5 * time.Second, Now: at(time.Second), Ask: []int64{1, 1}}
		res := draw(t, b, other)
		require.Equal(t, 1, res.Granted)
		require.True(t, res.InFlightBound)
		require.Equal(t, 3, res.CallsInFlight)
		require.True(t, res.NextAt.IsZero())
		// a's calls end: it releases one.
		a.Now, a.Calls, a.Ask = at(2*time.Second), 1, nil
		require.Equal(t, 2, draw(t, b, a).CallsInFlight)
		other.Now, other.Calls, other.Ask = at(2*time.Second), 1, []int64{1, 1}
		res = draw(t, b, other)
		require.Equal(t, 1, res.Granted)
		require.Equal(t, 3, res.CallsInFlight)
		// a is killed: its hold (last drawn at 2s) expires at 7s.
		other.Calls, other.Now = 2, at(6900*time.Millisecond)
		require.Zero(t, draw(t, b, other).Granted)
		other.Now = at(7100 * time.Millisecond)
		res = draw(t, b, other)
		require.Equal(t, 1, res.Granted, "a killed holder's share comes back")
		require.Equal(t, 3, res.CallsInFlight)
	})

	t.Run("APauseHoldsEveryHolderAndEmptiesTheBuckets", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req := store.ProviderLimitDrawParams{RequestsPerSecond: 10, RequestBurst: 2, Now: at(0), PauseUntil: at(time.Second), Ask: []int64{1}}
		res := draw(t, b, req)
		require.Zero(t, res.Granted)
		requireTime(t, t0.Add(time.Second), res.NextAt)
		other := store.ProviderLimitDrawParams{Holder: "b", RequestsPerSecond: 10, RequestBurst: 2, Now: at(500 * time.Millisecond), Ask: []int64{1}}
		res = draw(t, b, other)
		require.Zero(t, res.Granted, "the pause holds every holder")
		requireTime(t, t0.Add(time.Second), res.NextAt)
		other.Now = at(time.Second)
		res = draw(t, b, other)
		require.Zero(t, res.Granted, "the bucket is empty as of the pause's end")
		requireTime(t, t0.Add(1100*time.Millisecond), res.NextAt)
		other.Now = at(1100 * time.Millisecond)
		require.Equal(t, 1, draw(t, b, other).Granted)
	})

	t.Run("NoLimitGrantsEverything", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res := draw(t, b, store.ProviderLimitDrawParams{Ask: make([]int64, 50)})
		require.Equal(t, 50, res.Granted)
		require.True(t, res.NextAt.IsZero())
		require.False(t, res.Now.IsZero())
	})

	t.Run("ConcurrentHoldersShareOneBudget", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const holders, asks = 8, 6
		var (
			mu      sync.Mutex
			granted int
			wg      sync.WaitGroup
		)
		for h := range holders {
			wg.Go(func() {
				mine := 0
				for range asks {
					res, err := b.s.ProviderLimitDraw(t.Context(), &store.ProviderLimitDrawParams{
						Name: b.name, Holder: fmt.Sprintf("h%d", h), Now: at(0), HoldTTL: time.Minute,
						RequestsPerSecond: 1, RequestBurst: 20, CallsInFlight: 15, Calls: mine, Ask: []int64{1, 1},
					})
					if !assertNoError(t, err) {
						return
					}
					mine += res.Granted
				}
				mu.Lock()
				granted += mine
				mu.Unlock()
			})
		}
		wg.Wait()
		require.Equal(t, 15, granted, "the calls in flight bind before the burst of 20")
	})
}
