package retry_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/retry"
)

// TestCeiling: the cap of retry n grows by the multiplier from the initial
// backoff, stops at the maximum, and never shrinks or overflows.
func TestCeiling(t *testing.T) {
	t.Parallel()
	s, m := time.Second, time.Minute
	rows := []struct {
		name string
		b    retry.Backoff
		n    int
		want time.Duration
	}{
		{"first retry", retry.Backoff{Initial: s, Max: m, Multiplier: 2}, 1, s},
		{"n below 1 counts as the first", retry.Backoff{Initial: s, Max: m, Multiplier: 2}, 0, s},
		{"negative n", retry.Backoff{Initial: s, Max: m, Multiplier: 2}, -7, s},
		{"second", retry.Backoff{Initial: s, Max: m, Multiplier: 2}, 2, 2 * s},
		{"sixth", retry.Backoff{Initial: s, Max: m, Multiplier: 2}, 6, 32 * s},
		{"capped", retry.Backoff{Initial: s, Max: m, Multiplier: 2}, 7, m},
		{"far past the cap: no overflow", retry.Backoff{Initial: s, Max: m, Multiplier: 2}, 1 << 30, m},
		{"multiplier 1.5", retry.Backoff{Initial: 100 * time.Millisecond, Max: m, Multiplier: 1.5}, 3, 225 * time.Millisecond},
		{"zero multiplier: constant", retry.Backoff{Initial: s, Max: m}, 9, s},
		{"multiplier below 1 never shrinks", retry.Backoff{Initial: s, Max: m, Multiplier: 0.5}, 4, s},
		{"NaN multiplier", retry.Backoff{Initial: s, Max: m, Multiplier: math.NaN()}, 4, 0},
		{"infinite multiplier", retry.Backoff{Initial: s, Max: m, Multiplier: math.Inf(1)}, 4, m},
		{"max below initial", retry.Backoff{Initial: m, Max: s, Multiplier: 2}, 1, s},
		{"zero initial", retry.Backoff{Max: m, Multiplier: 2}, 5, 0},
		{"negative max", retry.Backoff{Initial: s, Max: -s, Multiplier: 2}, 1, 0},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, row.want, row.b.Ceiling(row.n))
		})
	}
}

// TestWaitIsFullJitterUnderTheCeiling: for seeded random jitter, every
// computed wait before retry n lies in [0, Ceiling(n)), the waits spread
// over the whole window (their top is near the ceiling, their bottom near
// zero), and the fixed ends of the jitter land on the ends of the window.
// The bound is checked on the computed waits, never on a clock.
func TestWaitIsFullJitterUnderTheCeiling(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, b := range []retry.Backoff{
		{Initial: 100 * time.Millisecond, Max: 2 * time.Second, Multiplier: 2},
		{Initial: time.Second, Max: time.Minute, Multiplier: 3},
		{Initial: time.Nanosecond, Max: time.Hour, Multiplier: 10},
	} {
		for n := 1; n <= 40; n++ {
			ceiling := b.Ceiling(n)
			low, high := ceiling, time.Duration(0)
			for range 500 {
				w := b.Wait(n, rng.Float64())
				require.GreaterOrEqual(t, w, time.Duration(0))
				if ceiling > 0 {
					require.Less(t, w, ceiling, "%+v retry %d (seed %d)", b, n, seed)
				}
				low, high = min(low, w), max(high, w)
			}
			if ceiling >= time.Microsecond {
				require.Greater(t, high, ceiling*9/10, "%+v retry %d: the waits reach up to the ceiling (seed %d)", b, n, seed)
				require.Less(t, low, ceiling/10, "%+v retry %d: and down to zero (seed %d)", b, n, seed)
			}
			require.Zero(t, b.Wait(n, 0))
			require.Equal(t, ceiling/2, b.Wait(n, 0.5))
			require.Less(t, b.Wait(n, math.Nextafter(1, 0)), max(ceiling, 1), "a product that rounds up stays under the ceiling")
			require.Equal(t, ceiling, b.Wait(n, 1), "a jitter pinned at its top waits the ceiling")
			require.Equal(t, ceiling, b.Wait(n, 7), "a jitter past 1 is clamped to 1")
			require.Zero(t, b.Wait(n, -1), "a jitter below 0 is clamped to zero")
		}
	}
}

// TestPolicyWait: Retry-After is a floor that may pass the maximum; the
// backoff decides when it is shorter.
func TestPolicyWait(t *testing.T) {
	t.Parallel()
	p := retry.Policy{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: 10 * time.Second, Multiplier: 2}
	rows := []struct {
		name       string
		n          int
		retryAfter time.Duration
		jitter     float64
		want       time.Duration
	}{
		{"no Retry-After", 3, 0, 0.5, 2 * time.Second},
		{"Retry-After under the jittered wait", 3, time.Second, 0.5, 2 * time.Second},
		{"Retry-After over the jittered wait", 3, 3 * time.Second, 0.5, 3 * time.Second},
		{"Retry-After past MaxBackoff", 9, time.Hour, 0.99, time.Hour},
		{"jitter 0 waits only the Retry-After", 2, 700 * time.Millisecond, 0, 700 * time.Millisecond},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, row.want, p.Wait(row.n, row.retryAfter, row.jitter))
		})
	}
}

// TestPolicySpent: MaxAttempts counts every attempt, the first included.
func TestPolicySpent(t *testing.T) {
	t.Parallel()
	for _, row := range []struct {
		max, attempts int
		spent         bool
	}{{1, 0, false}, {1, 1, true}, {3, 2, false}, {3, 3, true}, {3, 4, true}, {0, 0, true}} {
		require.Equal(t, row.spent, retry.Policy{MaxAttempts: row.max}.Spent(row.attempts), "%d of %d", row.attempts, row.max)
	}
}

// TestNotTriedStep: attempts that tried nothing grow the backoff step with
// the claims, up to NotTriedMaxStep and never further, so many such claims
// in a row keep the next real try near.
func TestNotTriedStep(t *testing.T) {
	t.Parallel()
	for claims, want := range map[int]int{-1: 1, 0: 1, 1: 1, 2: 2, 3: 3, 4: 3, 60: 3, math.MaxInt32: 3} {
		require.Equal(t, want, retry.NotTriedStep(claims), "claims %d", claims)
	}
	p := retry.Policy{InitialBackoff: time.Second, MaxBackoff: time.Minute, Multiplier: 2}
	require.Equal(t, 4*time.Second, p.Backoff().Ceiling(retry.NotTriedStep(1000)), "at most 4× the initial backoff at multiplier 2")
}

// TestJitter: the production source stays in [0, 1).
func TestJitter(t *testing.T) {
	t.Parallel()
	for range 10_000 {
		j := retry.Jitter()
		require.GreaterOrEqual(t, j, 0.0)
		require.Less(t, j, 1.0)
	}
}
