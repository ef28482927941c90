package llmsim_test

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm/llmsim"
)

// clock is a settable clock for Config.Now.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestLimitRequestsRefillsContinuously(t *testing.T) {
	t.Parallel()
	c := newClock()
	sim := start(t, llmsim.Config{Now: c.now, Limits: llmsim.Limits{Requests: 4, Window: time.Second}})
	for i := range 4 {
		a := chat(t, sim, "", "call "+strconv.Itoa(i))
		require.Equal(t, http.StatusOK, a.status)
		require.Equal(t, "4", a.header.Get("X-Ratelimit-Limit-Requests"))
		require.Equal(t, strconv.Itoa(3-i), a.header.Get("X-Ratelimit-Remaining-Requests"))
		require.Equal(t, (time.Duration(i+1) * 250 * time.Millisecond).String(), a.header.Get("X-Ratelimit-Reset-Requests"))
		require.Empty(t, a.header.Get("X-Ratelimit-Limit-Tokens"), "no token limit, no token headers")
	}
	a := chat(t, sim, "", "one too many")
	require.Equal(t, http.StatusTooManyRequests, a.status)
	require.Equal(t, "1", a.header.Get("Retry-After"))
	require.Equal(t, "250", a.header.Get("Retry-After-Ms"))
	require.Equal(t, "0", a.header.Get("X-Ratelimit-Remaining-Requests"))

	c.advance(250 * time.Millisecond) // a quarter window refills one request
	require.Equal(t, http.StatusOK, chat(t, sim, "", "refilled").status)
	require.Equal(t, http.StatusTooManyRequests, chat(t, sim, "", "not yet").status)

	st := sim.Stats()
	require.EqualValues(t, 7, st.Requests)
	require.EqualValues(t, 5, st.BilledCalls, "a 429 bills nothing")
	require.EqualValues(t, 2, st.RateLimited)
	require.Equal(t, map[string]int64{"requests": 2}, st.RateLimitedBy)

	c.advance(10 * time.Second) // a full bucket holds no more than its limit
	for i := range 4 {
		require.Equal(t, http.StatusOK, chat(t, sim, "", "after a pause "+strconv.Itoa(i)).status)
	}
	require.Equal(t, http.StatusTooManyRequests, chat(t, sim, "", "over").status)
}

func TestLimitTokensCountsPromptAndCompletion(t *testing.T) {
	t.Parallel()
	c := newClock()
	sim := start(t, llmsim.Config{Now: c.now, Limits: llmsim.Limits{Tokens: 1000, Window: time.Minute}})
	text := strings.Repeat("word ", 100)
	first := chat(t, sim, "k1", text)
	require.Equal(t, http.StatusOK, first.status)
	st := sim.Stats()
	used := st.BilledPromptTokens + st.BilledCompletionTokens
	require.Equal(t, "1000", first.header.Get("X-Ratelimit-Limit-Tokens"))
	require.Equal(t, strconv.FormatInt(1000-used, 10), first.header.Get("X-Ratelimit-Remaining-Tokens"))
	calls := 1
	for chat(t, sim, "k"+strconv.Itoa(calls+1), text).status == http.StatusOK {
		calls++
		require.Less(t, calls, 100)
	}
	require.EqualValues(t, 1000/used, calls, "admitted calls are those whose tokens fit")
	require.Equal(t, map[string]int64{"tokens": 1}, sim.Stats().RateLimitedBy)
}

func TestLimitInFlight(t *testing.T) {
	t.Parallel()
	sim := start(t, llmsim.Config{
		Limits: llmsim.Limits{InFlight: 2},
		Faults: llmsim.Faults{Latency: llmsim.Duration(300 * time.Millisecond)},
	})
	const calls = 6
	statuses := make([]int, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() { statuses[i] = chat(t, sim, "", "parallel "+strconv.Itoa(i)).status })
	}
	wg.Wait()
	ok := 0
	for _, s := range statuses {
		if s == http.StatusOK {
			ok++
		} else {
			require.Equal(t, http.StatusTooManyRequests, s)
		}
	}
	st := sim.Stats()
	require.Equal(t, 2, st.MaxInFlight, "the provider never answers more than its limit at once")
	require.GreaterOrEqual(t, ok, 2)
	require.EqualValues(t, calls-ok, st.RateLimitedBy["in_flight"])
	require.Zero(t, st.InFlight, "every call answered")
	require.Equal(t, 2, st.PeakInFlight, "no restart yet: the peak is the maximum")
	require.Equal(t, 2, sim.RestartPeak().PeakInFlight, "the peak before its restart")
	require.Zero(t, sim.Stats().PeakInFlight, "restarted at the calls in flight now: none")
	require.Equal(t, http.StatusOK, chat(t, sim, "", "after").status, "finished calls free their slots")
	st = sim.Stats()
	require.Equal(t, 1, st.PeakInFlight, "one call since the restart")
	require.Equal(t, 2, st.MaxInFlight, "the maximum is never restarted")
}

func TestRateLimitFaultForADuration(t *testing.T) {
	t.Parallel()
	c := newClock()
	sim := start(t, llmsim.Config{Now: c.now, Faults: llmsim.Faults{RateLimit: &llmsim.RateLimit{For: llmsim.Duration(time.Minute), RetryAfter: llmsim.Duration(time.Second)}}})
	for i := range 5 {
		a := chat(t, sim, "", "refused "+strconv.Itoa(i))
		require.Equal(t, http.StatusTooManyRequests, a.status)
		require.Equal(t, "1", a.header.Get("Retry-After"))
		c.advance(10 * time.Second)
	}
	c.advance(10 * time.Second)
	require.Equal(t, http.StatusOK, chat(t, sim, "", "served again").status)
	require.Equal(t, map[string]int64{"fault": 5}, sim.Stats().RateLimitedBy)
}

func TestSetLimitsOverHTTP(t *testing.T) {
	t.Parallel()
	sim := start(t, llmsim.Config{})
	a := do(t, http.MethodPost, sim.URL+"/oncejob/limits", "", `{"requests": 1, "window": "1h"}`)
	require.Equal(t, http.StatusOK, a.status, string(a.body))
	require.JSONEq(t, `{"requests":1,"tokens":0,"in_flight":0,"window":"1h0m0s"}`, string(a.body))
	require.Equal(t, http.StatusOK, chat(t, sim, "", "one").status)
	require.Equal(t, http.StatusTooManyRequests, chat(t, sim, "", "two").status)
	require.Equal(t, http.StatusBadRequest, do(t, http.MethodPost, sim.URL+"/oncejob/limits", "", `{"requests": -1}`).status)
	require.Equal(t, http.StatusBadRequest, do(t, http.MethodPost, sim.URL+"/oncejob/limits", "", `{"rpm": 1}`).status)
}
