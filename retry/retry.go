// Package retry says when a failed operation is tried again: exponential
// backoff with full jitter under a cap, the attempts that bound it, and the
// rule for a claim that tried nothing. The worker (a job's attempts), the
// relay (a delivery's), the Go SDK (a call's) and the reconnect loops (the
// watch hub, the Postgres listener, the worker's claims and outages) all
// wait by it, so "full jitter" means one thing (docs/architecture.md,
// "Backoff").
package retry

import (
	"math"
	"math/rand/v2"
	"time"
)

// Backoff is exponential backoff with full jitter: the wait before retry n
// (n >= 1; lower counts as 1) is uniform in [0, Ceiling(n)), so that
// processes that failed together do not come back together.
type Backoff struct {
	// Initial is the ceiling of the first wait.
	Initial time.Duration
	// Max caps every ceiling.
	Max time.Duration
	// Multiplier grows the ceiling from one retry to the next; below 1
	// (the zero value included) it is 1: a backoff never shrinks. Owners
	// of a policy default it to 2.
	Multiplier float64
}

// Ceiling is the cap of the wait before retry n: min(Max, Initial *
// Multiplier^(n-1)), never negative.
func (b Backoff) Ceiling(n int) time.Duration {
	m := max(b.Multiplier, 1)
	c := math.Min(float64(b.Initial)*math.Pow(m, float64(max(n, 1)-1)), float64(b.Max))
	if !(c > 0) { // negative, or NaN from a NaN multiplier
		return 0
	}
	return time.Duration(c)
}

// Wait is the wait before retry n: jitter, a fraction in [0, 1) (Jitter in
// production, a seeded or fixed one in tests), of Ceiling(n). For such a
// jitter it is below the ceiling (a product that rounds up to it is
// clamped); a jitter out of range is clamped to [0, 1], so a test that pins
// it at 1 waits exactly the ceiling.
func (b Backoff) Wait(n int, jitter float64) time.Duration {
	c := b.Ceiling(n)
	if jitter >= 1 {
		return c
	}
	w := time.Duration(max(jitter, 0) * float64(c))
	if w >= c {
		return max(c-1, 0)
	}
	return w
}

// Jitter is the production source of jitter: uniform in [0, 1). Spread, not
// secrecy, is the point, so math/rand.
func Jitter() float64 { return rand.Float64() }

// Policy bounds a retried operation by its attempts and paces it with
// full-jitter backoff. It is the common part of the engine's retry policy
// (pipeline.RetryPolicy, which adds a deadline and a token budget) and the
// relay's (relay.RetryPolicy, which adds a maximum age); each owner sets
// its own defaults for zero fields.
type Policy struct {
	// MaxAttempts counts every attempt, the first included.
	MaxAttempts int `yaml:"max_attempts"`
	// InitialBackoff is the ceiling of the first wait.
	InitialBackoff time.Duration `yaml:"initial_backoff"`
	// MaxBackoff caps every wait but the other side's own word on when to
	// come back (Retry-After).
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// Multiplier grows the ceiling from one retry to the next (Backoff).
	Multiplier float64 `yaml:"multiplier"`
}

// Backoff is the policy's backoff.
func (p Policy) Backoff() Backoff {
	return Backoff{Initial: p.InitialBackoff, Max: p.MaxBackoff, Multiplier: p.Multiplier}
}

// Wait is the wait before retry n: the backoff's, raised to retryAfter
// when the other side asked for more (a 429's or a 503's Retry-After),
// which may pass MaxBackoff.
func (p Policy) Wait(n int, retryAfter time.Duration, jitter float64) time.Duration {
	return max(p.Backoff().Wait(n, jitter), retryAfter)
}

// Spent reports whether attempts (this one included) leave no retry.
func (p Policy) Spent(attempts int) bool { return attempts >= p.MaxAttempts }

// NotTriedMaxStep bounds the backoff step of an attempt that tried nothing
// (a claim by a worker of another version, a wait for the provider's
// pacing): such attempts go back to the budget, and however many come in a
// row, the next real try is at most this step's ceiling away (4× the
// initial backoff at multiplier 2). Without the bound a few unlucky claims
// pushed a job a minute away from a worker that stood idle.
const NotTriedMaxStep = 3

// NotTriedStep is the backoff step after claims claims that tried nothing:
// it grows with them, to NotTriedMaxStep and no further.
func NotTriedStep(claims int) int { return min(max(claims, 1), NotTriedMaxStep) }
