package pace_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/llm/pace"
	"github.com/oncejob/oncejob/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type harness struct {
	sim    *llmsim.Running
	client *llm.OpenAIClient
	store  *store.ProviderLimitMemory
}

func newHarness(t *testing.T, limits llmsim.Limits, latency time.Duration) *harness {
	t.Helper()
	sim, err := llmsim.Start("", llmsim.Config{Limits: limits, Faults: llmsim.Faults{Latency: llmsim.Duration(latency)}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sim.Close()) })
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 256
	t.Cleanup(transport.CloseIdleConnections)
	client, err := llm.NewOpenAI(llm.Config{BaseURL: sim.URL, HTTPClient: &http.Client{Transport: transport}})
	require.NoError(t, err)
	return &harness{sim: sim, client: client, store: &store.ProviderLimitMemory{}}
}

func (h *harness) pacer(t *testing.T, holder string, limits map[string]pace.Limit) *pace.Pacer {
	t.Helper()
	p, err := pace.New(pace.Config{Store: h.store, Holder: holder, Limits: limits, MaxWait: time.Minute})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// call sends one call through p, as the worker does: a 429 waits its turn
// again; it reports the 429s it met.
func (h *harness) call(ctx context.Context, p *pace.Pacer, i int) (int, error) {
	req := &llm.Request{Model: "sim-1", Messages: []llm.Message{{Role: "user", Content: fmt.Sprintf("document %d: the quarterly numbers were fine and the auditors agreed", i)}}}
	limited := 0
	for {
		ticket, err := p.Wait(ctx, pace.Call{Limit: "default", Messages: req.Messages, Tenant: "t"})
		if err != nil {
			return limited, err
		}
		resp, err := h.client.Generate(ctx, req)
		ticket.Done(resp, err)
		if class, ok := llm.ClassOf(err); ok && class == llm.ClassRateLimited {
			limited++
			continue
		}
		return limited, err
	}
}

func (h *harness) run(t *testing.T, pacers []*pace.Pacer, calls int) (limited int64) {
	t.Helper()
	var wg sync.WaitGroup
	var n atomic.Int64
	for i := range calls {
		wg.Go(func() {
			l, err := h.call(t.Context(), pacers[i%len(pacers)], i)
			n.Add(int64(l))
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	return n.Load()
}

func TestConfiguredRequestLimitSeesNo429(t *testing.T) {
	t.Parallel()
	// 1,200 requests a minute, as 20 per second.
	h := newHarness(t, llmsim.Limits{Requests: 20, Window: time.Second}, 0)
	p := h.pacer(t, "p1", map[string]pace.Limit{"default": {RequestsPerMinute: 1200}})
	h.run(t, []*pace.Pacer{p}, 60)
	st := h.sim.Stats()
	require.EqualValues(t, 60, st.BilledCalls)
	require.LessOrEqual(t, st.RateLimited, int64(0), "the provider's limit is never passed: %v", st.RateLimitedBy)
}

func TestConfiguredTokenLimitSeesNo429(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llmsim.Limits{Tokens: 600, Window: time.Second}, 0)
	p := h.pacer(t, "p1", map[string]pace.Limit{"default": {TokensPerMinute: 600 * 60}})
	h.run(t, []*pace.Pacer{p}, 60)
	st := h.sim.Stats()
	require.EqualValues(t, 60, st.BilledCalls)
	require.Zero(t, st.RateLimited, "%v", st.RateLimitedBy)
}

func TestCallsInFlightNeverPassTheLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llmsim.Limits{InFlight: 4}, 30*time.Millisecond)
	// Two processes share the limit.
	limits := map[string]pace.Limit{"default": {CallsInFlight: 4}}
	pacers := []*pace.Pacer{h.pacer(t, "p1", limits), h.pacer(t, "p2", limits)}
	h.run(t, pacers, 60)
	st := h.sim.Stats()
	require.EqualValues(t, 60, st.BilledCalls)
	require.LessOrEqual(t, st.MaxInFlight, 4)
	require.Zero(t, st.RateLimited, "%v", st.RateLimitedBy)
}

func TestTwoProcessesShareOneRequestLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llmsim.Limits{Requests: 20, Window: time.Second}, 0)
	limits := map[string]pace.Limit{"default": {RequestsPerMinute: 1200}}
	pacers := []*pace.Pacer{h.pacer(t, "p1", limits), h.pacer(t, "p2", limits), h.pacer(t, "p3", limits)}
	h.run(t, pacers, 60)
	st := h.sim.Stats()
	require.EqualValues(t, 60, st.BilledCalls)
	require.Zero(t, st.RateLimited, "%v", st.RateLimitedBy)
}

func TestNoLimitConfiguredLearnsTheProvidersFromItsHeaders(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llmsim.Limits{Requests: 20, Window: time.Second}, 0)
	p := h.pacer(t, "p1", nil)
	first := h.run(t, []*pace.Pacer{p}, 30)
	require.Equal(t, first, h.sim.Stats().RateLimited)
	limited := h.run(t, []*pace.Pacer{p}, 80)
	st := h.sim.Stats()
	require.EqualValues(t, 110, st.BilledCalls)
	require.LessOrEqual(t, limited, int64(1), "after the first window, the headers set the pace: %v", st.RateLimitedBy)
	stats := p.Stats()
	require.Len(t, stats, 1)
	require.InDelta(t, 1200, stats[0].Learned.RequestsPerMinute, 120)
}

func TestAWrongLimitConvergesToTheProviders(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llmsim.Limits{Requests: 20, Window: time.Second}, 0)
	p := h.pacer(t, "p1", map[string]pace.Limit{"default": {RequestsPerMinute: 6000}})
	first := h.run(t, []*pace.Pacer{p}, 30)
	t.Logf("429s in the first window: %d", first)
	limited := h.run(t, []*pace.Pacer{p}, 80)
	st := h.sim.Stats()
	require.EqualValues(t, 110, st.BilledCalls)
	require.LessOrEqual(t, limited, int64(1), "after the first window the learned limit binds: %v", st.RateLimitedBy)
	require.InDelta(t, 1200, p.Stats()[0].Effective.RequestsPerMinute, 120)
}

func TestALongWaitIsHandedBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llmsim.Limits{}, 0)
	p, err := pace.New(pace.Config{Store: h.store, Holder: "p", MaxWait: time.Second, Limits: map[string]pace.Limit{"slow": {RequestsPerMinute: 6}}})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	var deferred []*pace.WaitError
	var tickets []*pace.Ticket
	for range 6 {
		ticket, err := p.Wait(t.Context(), pace.Call{Limit: "slow", Tenant: "t", Batch: true})
		var we *pace.WaitError
		if errors.As(err, &we) {
			deferred = append(deferred, we)
			continue
		}
		require.NoError(t, err)
		tickets = append(tickets, ticket)
	}
	require.NotEmpty(t, deferred, "one a second: the later calls would wait past a second")
	for i, we := range deferred {
		require.Equal(t, "slow", we.Limit)
		require.Equal(t, "requests per minute", we.Reason)
		if i > 0 {
			require.True(t, we.Until.After(deferred[i-1].Until), "deferred calls come back one after another")
		}
	}
	for _, tk := range tickets {
		tk.Done(nil, nil)
	}
	_, err = p.Wait(t.Context(), pace.Call{Limit: "slow", Deadline: time.Now().Add(-time.Second)})
	require.ErrorAs(t, err, new(*pace.WaitError), "a wait past the deadline is handed back")
}

func TestInvalidLimitsRefused(t *testing.T) {
	t.Parallel()
	for _, l := range []pace.Limit{{RequestsPerMinute: -1}, {TokensPerMinute: -5}, {CallsInFlight: -1}, {RequestsPerMinute: 1e13}} {
		_, err := pace.New(pace.Config{Store: &store.ProviderLimitMemory{}, Holder: "h", Limits: map[string]pace.Limit{"x": l}})
		require.Error(t, err, "%+v", l)
	}
}

// slowFirstDraw is a store whose first draw takes 300 ms, as a loaded
// database's can: calls arrive before the limit granted anything.
type slowFirstDraw struct {
	store.ProviderLimitMemory
	once sync.Once
}

func (s *slowFirstDraw) ProviderLimitDraw(ctx context.Context, p *store.ProviderLimitDrawParams) (*store.ProviderLimitDrawResult, error) {
	s.once.Do(func() { time.Sleep(300 * time.Millisecond) })
	return s.ProviderLimitMemory.ProviderLimitDraw(ctx, p)
}

// TestCallsHandedBackComeBackSpread: 60 calls arrive at once at a limit of
// 20 a second that has granted nothing yet (its first draw is slow), and
// each waits at most 100 ms in process. The ones that cannot be granted in time are handed
// back with next tries spaced at the limit's rate after the calls granted
// before them, never all at one time (which left the limit idle until
// then and a herd after), and never all at once now (a limit with no grant
// yet looked free).
func TestCallsHandedBackComeBackSpread(t *testing.T) {
	t.Parallel()
	p, err := pace.New(pace.Config{Store: &slowFirstDraw{}, Holder: "h", Limits: map[string]pace.Limit{"default": {RequestsPerMinute: 1200}}, MaxWait: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	start := time.Now()
	var (
		mu     sync.Mutex
		until  []time.Time
		passed int
		wg     sync.WaitGroup
	)
	for i := range 60 {
		wg.Go(func() {
			ticket, err := p.Wait(t.Context(), pace.Call{Limit: "default", Messages: []llm.Message{{Role: "user", Content: fmt.Sprintf("call %d", i)}}, MaxTokens: 10, Tenant: "t"})
			mu.Lock()
			defer mu.Unlock()
			var we *pace.WaitError
			if errors.As(err, &we) {
				until = append(until, we.Until)
				return
			}
			require.NoError(t, err)
			ticket.Done(nil, nil)
			passed++
		})
	}
	wg.Wait()
	require.Equal(t, 60, passed+len(until))
	require.Less(t, passed, 30, "20 a second with a burst of 10: most calls are handed back")
	distinct := map[int64]bool{}
	var latest time.Duration
	for _, u := range until {
		distinct[u.UnixMilli()/25] = true
		latest = max(latest, u.Sub(start))
	}
	require.Greater(t, len(distinct), len(until)/2, "next tries spread, not one time for all: %v", until)
	require.Greater(t, latest, time.Duration(len(until)-1)*40*time.Millisecond, "the last comes back after the others, at the limit's rate")
}

// TestTokenLimitGrantsManyOnceUsageIsKnown: calls that arrived while the
// tokens a call takes were a guess (a long completion: hundreds of tokens,
// most of the limit's burst) are granted on what the answers taught when
// their turn comes, so several go at once; reserved on the first guess,
// one call held the burst and they went one at a time.
func TestTokenLimitGrantsManyOnceUsageIsKnown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llmsim.Limits{Tokens: 1000, Window: time.Second}, 100*time.Millisecond)
	p := h.pacer(t, "p1", map[string]pace.Limit{"default": {TokensPerMinute: 60000}})
	h.run(t, []*pace.Pacer{p}, 60)
	st := h.sim.Stats()
	require.EqualValues(t, 60, st.BilledCalls)
	require.Zero(t, st.RateLimited, "%v", st.RateLimitedBy)
	require.GreaterOrEqual(t, st.MaxInFlight, 3, "calls of about 30 tokens against a burst of 500 go several at once")
}

// TestAfterA429TheProviderKeepsRoom: 30 calls at once under a configured
// limit five times the provider's (20 a second; answers take 200 ms, so
// the first answers' headers come after the calls went) meet 429s; the
// pause their Retry-After sets lasts until the provider's bucket holds a
// burst again, so the 80 calls after go with the room a burst keeps for
// the jitter between a grant and its arrival (x-ratelimit-remaining-
// requests). The pause ended when the provider held one call: the calls
// after went at its very rate, its bucket at 1 from then on, and a call
// that arrived a moment early on a loaded machine met a 429.
func TestAfterA429TheProviderKeepsRoom(t *testing.T) {
	t.Parallel()
	h := newHarness(t, llmsim.Limits{Requests: 20, Window: time.Second}, 200*time.Millisecond)
	p := h.pacer(t, "p1", map[string]pace.Limit{"default": {RequestsPerMinute: 6000}})
	round := func(calls int) (limited int64, least int64) {
		var mu sync.Mutex
		least = math.MaxInt64
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				req := &llm.Request{Model: "sim-1", Messages: []llm.Message{{Role: "user", Content: fmt.Sprintf("document %d", i)}}}
				for {
					ticket, err := p.Wait(t.Context(), pace.Call{Limit: "default", Messages: req.Messages, Tenant: "t"})
					if !assert.NoError(t, err) {
						return
					}
					resp, err := h.client.Generate(t.Context(), req)
					ticket.Done(resp, err)
					mu.Lock()
					if err == nil {
						least = min(least, resp.RateLimits.Requests.Remaining)
					} else {
						limited++
					}
					mu.Unlock()
					if class, ok := llm.ClassOf(err); !ok || class != llm.ClassRateLimited {
						assert.NoError(t, err)
						return
					}
				}
			})
		}
		wg.Wait()
		return limited, least
	}
	first, _ := round(30)
	require.Positive(t, first, "30 calls at once against 20 a second")
	limited, least := round(80)
	t.Logf("429s: %d, then %d; the provider's remaining requests after: at least %d", first, limited, least)
	// 10-11 with the refill, 1 without it: 3 leaves room for grants
	// bunched by a loaded machine and still tells the two apart.
	require.GreaterOrEqual(t, least, int64(3), "the provider's bucket keeps room after the pause")
}
