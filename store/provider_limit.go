package store

import (
	"context"
	"math"
	"sync"
	"time"
)

// ProviderLimitStore holds the budgets of the provider limits that every
// process draws from (docs/architecture.md, "Provider limits"). A limit is
// a named row: a GCRA bucket for requests and one for tokens, kept as the
// time each would be whole again, and the calls each holder has in flight,
// each holder's count expiring HoldTTL after its last draw so that a killed
// process's share comes back.
type ProviderLimitStore interface {
	// ProviderLimitDraw is one process's exchange with a limit, in one
	// statement (Postgres) or under one lock (SQLite, in process):
	//
	//  1. the holder's own count of calls in flight becomes Calls (its
	//     calls that ended are released) and ReturnTokens go back to the
	//     token bucket (a negative value takes more: a call used more than
	//     it reserved);
	//  2. PauseUntil, when set, empties both buckets as of that time and no
	//     call is granted before it;
	//  3. of the calls asked (Ask, their tokens, in order) the longest
	//     prefix that fits the request bucket, the token bucket and the
	//     calls in flight is granted: taken from the buckets and added to
	//     the holder's count.
	//
	// A zero rate or CallsInFlight sets no limit of that kind. A call
	// larger than its bucket's burst passes when the bucket is whole, so
	// no call waits forever. An unknown Name starts whole.
	ProviderLimitDraw(ctx context.Context, params *ProviderLimitDrawParams) (*ProviderLimitDrawResult, error)
}

// ProviderLimitDrawParams is one draw. Rates are per second.
type ProviderLimitDrawParams struct {
	Name   string
	Holder string
	// Now, when set, is the time the draw runs at (tests); nil is the
	// store's clock, shared by every process.
	Now *time.Time

	RequestsPerSecond float64
	RequestBurst      float64
	TokensPerSecond   float64
	TokenBurst        float64
	CallsInFlight     int
	// HoldTTL is how long the holder's count of calls in flight holds
	// after this draw without another.
	HoldTTL time.Duration

	// Calls is the holder's calls in flight before this draw's grant.
	Calls int
	// Ask are the tokens of each call asked for, in the order they are
	// to be granted; empty asks none (a draw that only releases).
	Ask          []int64
	ReturnTokens int64
	PauseUntil   *time.Time
}

// ProviderLimitDrawResult is what a draw granted and what it saw.
type ProviderLimitDrawResult struct {
	// Granted is how many calls of Ask, from its first, were granted.
	Granted int
	// NextAt is when the first call not granted fits the buckets (the
	// calls in flight aside); zero when every call asked was granted.
	NextAt time.Time
	// InFlightBound: the calls in flight stopped the grant; another
	// holder's call must end first.
	InFlightBound bool
	// CallsInFlight is every holder's calls in flight after the grant.
	CallsInFlight int
	// Now is the time of the draw by the store's clock.
	Now time.Time
}

// ProviderLimitState is one limit's row; ProviderLimitMemory keeps it in
// process, and it is the reference of the SQL draw.
type ProviderLimitState struct {
	RequestsTAT float64 // seconds since the epoch when the request bucket is whole
	TokensTAT   float64
	PausedUntil float64
	Holds       map[string]ProviderLimitHold
}

// ProviderLimitHold is one holder's calls in flight and when they expire.
type ProviderLimitHold struct {
	Calls   int
	Expires float64 // seconds since the epoch
}

// ProviderLimitMemory implements ProviderLimitStore in process: the
// embedded store's limits, which one process uses.
type ProviderLimitMemory struct {
	mu     sync.Mutex
	limits map[string]*ProviderLimitState
}

// ProviderLimitDraw implements ProviderLimitStore.
func (m *ProviderLimitMemory) ProviderLimitDraw(_ context.Context, p *ProviderLimitDrawParams) (*ProviderLimitDrawResult, error) {
	now := time.Now()
	if p.Now != nil {
		now = *p.Now
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.limits == nil {
		m.limits = map[string]*ProviderLimitState{}
	}
	s, ok := m.limits[p.Name]
	if !ok {
		s = &ProviderLimitState{Holds: map[string]ProviderLimitHold{}}
		m.limits[p.Name] = s
	}
	return s.Draw(p, now), nil
}

// Draw applies one draw to s at now (ProviderLimitStore.ProviderLimitDraw).
func (s *ProviderLimitState) Draw(p *ProviderLimitDrawParams, now time.Time) *ProviderLimitDrawResult {
	t := epochSeconds(now)
	// 1. The holder's count and the settlement.
	others := 0
	for h, hold := range s.Holds {
		switch {
		case hold.Expires <= t:
			delete(s.Holds, h)
		case h != p.Holder:
			others += hold.Calls
		}
	}
	if p.TokensPerSecond > 0 && p.ReturnTokens != 0 {
		if p.ReturnTokens > 0 {
			s.TokensTAT -= float64(p.ReturnTokens) / p.TokensPerSecond
		} else {
			s.TokensTAT = math.Max(s.TokensTAT, t) + float64(-p.ReturnTokens)/p.TokensPerSecond
		}
	}
	// 2. A pause empties the buckets as of its end.
	if p.PauseUntil != nil {
		pause := epochSeconds(*p.PauseUntil)
		s.PausedUntil = math.Max(s.PausedUntil, pause)
		if p.RequestsPerSecond > 0 {
			s.RequestsTAT = math.Max(s.RequestsTAT, pause+p.RequestBurst/p.RequestsPerSecond)
		}
		if p.TokensPerSecond > 0 {
			s.TokensTAT = math.Max(s.TokensTAT, pause+p.TokenBurst/p.TokensPerSecond)
		}
	}
	// 3. The longest prefix that fits.
	res := &ProviderLimitDrawResult{Now: now}
	calls := max(p.Calls, 0)
	paused := s.PausedUntil > t
	for _, tokens := range p.Ask {
		if paused {
			res.NextAt = secondsTime(s.PausedUntil)
			break
		}
		reqAt := gcraNext(s.RequestsTAT, t, 1, p.RequestsPerSecond, p.RequestBurst)
		tokAt := gcraNext(s.TokensTAT, t, float64(tokens), p.TokensPerSecond, p.TokenBurst)
		if at := math.Max(reqAt, tokAt); at > t+1e-6 { // a microsecond of float error
			res.NextAt = secondsTime(at)
			break
		}
		if p.CallsInFlight > 0 && others+calls >= p.CallsInFlight {
			res.InFlightBound = true
			break
		}
		if p.RequestsPerSecond > 0 {
			s.RequestsTAT = math.Max(s.RequestsTAT, t) + 1/p.RequestsPerSecond
		}
		if p.TokensPerSecond > 0 {
			s.TokensTAT = math.Max(s.TokensTAT, t) + float64(tokens)/p.TokensPerSecond
		}
		calls++
		res.Granted++
	}
	if calls > 0 {
		s.Holds[p.Holder] = ProviderLimitHold{Calls: calls, Expires: t + p.HoldTTL.Seconds()}
	} else {
		delete(s.Holds, p.Holder)
	}
	res.CallsInFlight = others + calls
	return res
}

// gcraNext is when a cost of u fits a bucket whose theoretical arrival
// time is tat, at now: now or earlier when it fits. A cost above the
// burst fits a whole bucket. A zero rate always fits.
func gcraNext(tat, now, u, rate, burst float64) float64 {
	if rate <= 0 {
		return now
	}
	return math.Max(tat, now) + (u-math.Max(burst, u))/rate
}

func epochSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func secondsTime(s float64) time.Time {
	return time.Unix(0, int64(s*1e9))
}
