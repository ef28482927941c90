package llmsim

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Limits are the rate limits the simulator enforces the way hosted
// providers do: a bucket per limit that holds Requests (or Tokens) and
// refills continuously, the whole of it per Window; a call that does not
// fit is answered 429 with Retry-After (and OpenAI's retry-after-ms) and
// billed nothing. Every answer to a chat completion, 429 or not, carries
// OpenAI's headers for each limit set:
//
//	x-ratelimit-limit-requests      Requests
//	x-ratelimit-remaining-requests  what the bucket holds now
//	x-ratelimit-reset-requests      until it is full again ("1.5s")
//
// and the same with -tokens. A call's tokens are its prompt's and its
// completion's, counted as the billing counts them, taken when it arrives.
// InFlight bounds the calls being answered at once (the latency included).
// Zero fields set no limit. Providers count per minute; a shorter Window
// lets a test see many windows in seconds.
type Limits struct {
	Requests int64         `json:"requests,omitempty"`
	Tokens   int64         `json:"tokens,omitempty"`
	InFlight int           `json:"in_flight,omitempty"`
	Window   time.Duration `json:"window,omitempty"` // default one minute
}

// WithDefaults returns l with a zero Window set to one minute.
func (l Limits) WithDefaults() Limits {
	if l.Window == 0 {
		l.Window = time.Minute
	}
	return l
}

// Validate reports a negative limit or window.
func (l Limits) Validate() error {
	if l.Requests < 0 || l.Tokens < 0 || l.InFlight < 0 || l.Window < 0 {
		return fmt.Errorf("llmsim: limits must not be negative (requests %d, tokens %d, in flight %d, window %s)", l.Requests, l.Tokens, l.InFlight, l.Window)
	}
	return nil
}

// bucket is one continuously refilling limit; guarded by Server.mu.
type bucket struct {
	capacity float64
	perSec   float64
	level    float64
	at       time.Time // when level was computed
}

func newBucket(capacity int64, window time.Duration, now time.Time) *bucket {
	if capacity <= 0 {
		return nil
	}
	c := float64(capacity)
	return &bucket{capacity: c, perSec: c / window.Seconds(), level: c, at: now}
}

func (b *bucket) refill(now time.Time) {
	if d := now.Sub(b.at).Seconds(); d > 0 {
		b.level = math.Min(b.capacity, b.level+d*b.perSec)
	}
	b.at = now
}

// wait is how long until the bucket holds n; 0 when it does. A call larger
// than the whole bucket waits until it is full and then passes.
func (b *bucket) wait(n float64) time.Duration {
	n = math.Min(n, b.capacity)
	if b.level >= n {
		return 0
	}
	return time.Duration((n - b.level) / b.perSec * float64(time.Second))
}

// take removes n (at most what a full bucket holds).
func (b *bucket) take(n float64) { b.level -= math.Min(n, b.capacity) }

// header writes the bucket's x-ratelimit-* headers for kind.
func (b *bucket) header(h http.Header, kind string) {
	if b == nil {
		return
	}
	reset := time.Duration((b.capacity - b.level) / b.perSec * float64(time.Second)).Round(time.Millisecond)
	h.Set("X-Ratelimit-Limit-"+kind, strconv.FormatInt(int64(b.capacity), 10))
	h.Set("X-Ratelimit-Remaining-"+kind, strconv.FormatInt(int64(math.Max(0, math.Floor(b.level))), 10))
	h.Set("X-Ratelimit-Reset-"+kind, reset.String())
}

// limiter is the armed Limits; guarded by Server.mu.
type limiter struct {
	cfg      Limits
	requests *bucket
	tokens   *bucket
	inFlight int
}

func newLimiter(l Limits, now time.Time) *limiter {
	l = l.WithDefaults()
	return &limiter{cfg: l, requests: newBucket(l.Requests, l.Window, now), tokens: newBucket(l.Tokens, l.Window, now)}
}

// admit decides a call of tokens arriving at now: the reason it is refused
// ("" when admitted, its requests and tokens taken and its slot held) and
// how long to wait before another try.
func (l *limiter) admit(tokens int64, now time.Time) (reason string, retryAfter time.Duration) {
	for _, b := range []*bucket{l.requests, l.tokens} {
		if b != nil {
			b.refill(now)
		}
	}
	if l.requests != nil {
		if w := l.requests.wait(1); w > 0 {
			return "requests", w
		}
	}
	if l.tokens != nil {
		if w := l.tokens.wait(float64(tokens)); w > 0 {
			return "tokens", w
		}
	}
	if l.cfg.InFlight > 0 && l.inFlight >= l.cfg.InFlight {
		// No bucket says when a call ends: a short hint, as providers give.
		return "in_flight", 100 * time.Millisecond
	}
	if l.requests != nil {
		l.requests.take(1)
	}
	if l.tokens != nil {
		l.tokens.take(float64(tokens))
	}
	l.inFlight++
	return "", 0
}

// headers writes the x-ratelimit-* headers as of now.
func (l *limiter) headers(h http.Header, now time.Time) {
	for _, b := range []*bucket{l.requests, l.tokens} {
		if b != nil {
			b.refill(now)
		}
	}
	l.requests.header(h, "Requests")
	l.tokens.header(h, "Tokens")
}

// setRetryAfter writes a 429's wait hint: Retry-After in whole seconds,
// rounded up, and retry-after-ms.
func setRetryAfter(h http.Header, d time.Duration) {
	h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10))
	h.Set("Retry-After-Ms", strconv.FormatInt(max(d.Milliseconds(), 1), 10))
}
