package pace

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm"
)

func testLimiter(configured Limit) *limiter {
	return newLimiter(&Pacer{cfg: Config{}.WithDefaults()}, "x", configured)
}

// TestWholeBucketReadingIsNoRate: an answer whose headers show the
// provider's bucket whole says nothing of its rate. With a limit
// configured it leaves the pace alone (it was taken for a limit per
// minute: a provider with 20 a one-second window was paced at 20 a
// minute); with none, the guess gives way to the first real reading.
func TestWholeBucketReadingIsNoRate(t *testing.T) {
	whole := &llm.RateLimits{Requests: llm.RateLimit{Limit: 20, Remaining: 20}}
	l := testLimiter(Limit{RequestsPerMinute: 1200})
	l.observe(whole)
	require.InDelta(t, 20, l.effective().reqRate, 1e-9)

	l = testLimiter(Limit{})
	l.observe(whole)
	require.InDelta(t, 20.0/60, l.effective().reqRate, 1e-9, "nothing known: per minute")
	l.observe(&llm.RateLimits{Requests: llm.RateLimit{Limit: 20, Remaining: 17, Reset: 125 * time.Millisecond}})
	require.InDelta(t, 20, l.effective().reqRate, 1e-9, "the first reading replaces the guess")
	l.observe(&llm.RateLimits{Requests: llm.RateLimit{Limit: 20, Remaining: 17, Reset: 250 * time.Millisecond}})
	require.InDelta(t, 0.7*20+0.3*10, l.effective().reqRate, 1e-9, "then readings are averaged")
}

// TestDeferredCallsCountOnce: calls deferred at once come back spaced at
// the rate the limit serves (here its calls in flight over their latency,
// below its requests per second), after the calls deferred before them
// that have not come back; a call whose next try passed counts no more,
// so calls deferred again and again do not push the next tries out.
func TestDeferredCallsCountOnce(t *testing.T) {
	l := testLimiter(Limit{RequestsPerMinute: 1200, CallsInFlight: 10})
	l.latencyMean = 1 // 10 calls a second
	now := time.Now()
	var until []time.Time
	for range 50 {
		until = append(until, l.deferCall(now, time.Second, 100).Until)
	}
	for i, u := range until {
		require.InDelta(t, 1+float64(i)/10, u.Sub(now).Seconds(), 1e-6, "call %d", i)
	}
	// Each comes back at its next try and is deferred again: it goes after
	// the ones still out, never after itself.
	for round := range 5 {
		for i := range until {
			back := now.Add(time.Duration(round)*10*time.Second + time.Duration(i)*100*time.Millisecond).Add(time.Second)
			got := l.deferCall(back, time.Second, 100).Until
			require.LessOrEqual(t, got.Sub(back), time.Second+5*time.Second+time.Millisecond, "round %d call %d", round, i)
		}
	}
	require.LessOrEqual(t, len(l.deferredUntil), 50)
}
