package relay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBackoffIsFullJitterUnderItsCeiling: the wait after attempt n is
// uniform in [0, min(max, initial * 2^(n-1))], and never below a
// receiver's Retry-After. (The webhook tests check the journal's gaps
// against Retry-After from below; the ceiling is checked here, on the
// computed waits, not on a loaded machine's clock.)
func TestBackoffIsFullJitterUnderItsCeiling(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{InitialBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second}
	for attempts, ceiling := range map[int32]time.Duration{
		0: 100 * time.Millisecond, 1: 100 * time.Millisecond, 2: 200 * time.Millisecond,
		4: 800 * time.Millisecond, 5: 1600 * time.Millisecond, 6: 2 * time.Second, 40: 2 * time.Second,
	} {
		var top time.Duration
		for range 2000 {
			d := backoff(p, attempts, 0)
			require.GreaterOrEqual(t, d, time.Duration(0))
			require.LessOrEqual(t, d, ceiling, "attempt %d", attempts)
			top = max(top, d)
		}
		require.Greater(t, top, ceiling/2, "attempt %d: the waits spread up to the ceiling", attempts)

		for _, retryAfter := range []time.Duration{time.Second, 5 * time.Second} {
			d := backoff(p, attempts, retryAfter)
			require.GreaterOrEqual(t, d, retryAfter, "attempt %d: a Retry-After of %s", attempts, retryAfter)
			require.LessOrEqual(t, d, max(ceiling, retryAfter))
		}
	}
}
