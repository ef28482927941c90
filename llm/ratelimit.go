package llm

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RateLimits is what a provider's answer said of its rate limits, in
// OpenAI's x-ratelimit-{limit,remaining,reset}-{requests,tokens} headers:
// the limit (per its window), what remains of it, and how long until it is
// whole again. A zero Limit means the header was absent.
type RateLimits struct {
	Requests RateLimit
	Tokens   RateLimit
}

// RateLimit is one limit's headers.
type RateLimit struct {
	Limit     int64
	Remaining int64
	Reset     time.Duration
}

// PerSecond is the rate the limit refills at, as far as the headers tell:
// what is missing divided by the time until it is whole again. Remaining
// is rounded down, so half a unit less is missing on average. ok is false
// when they cannot tell (the limit is whole, or a header is absent).
func (l RateLimit) PerSecond() (rate float64, ok bool) {
	missing := l.Limit - l.Remaining
	if l.Limit <= 0 || missing <= 0 || l.Reset <= 0 {
		return 0, false
	}
	return (float64(missing) - 0.5) / l.Reset.Seconds(), true
}

// parseRateLimits reads the headers; nil when the answer had none.
func parseRateLimits(h http.Header) *RateLimits {
	r := &RateLimits{Requests: parseRateLimit(h, "requests"), Tokens: parseRateLimit(h, "tokens")}
	if r.Requests.Limit == 0 && r.Tokens.Limit == 0 {
		return nil
	}
	return r
}

func parseRateLimit(h http.Header, kind string) RateLimit {
	limit, err := strconv.ParseInt(strings.TrimSpace(h.Get("X-Ratelimit-Limit-"+kind)), 10, 64)
	if err != nil || limit <= 0 {
		return RateLimit{}
	}
	remaining, err := strconv.ParseInt(strings.TrimSpace(h.Get("X-Ratelimit-Remaining-"+kind)), 10, 64)
	if err != nil || remaining < 0 {
		remaining = limit
	}
	return RateLimit{Limit: limit, Remaining: min(remaining, limit), Reset: parseReset(h.Get("X-Ratelimit-Reset-" + kind))}
}

// parseReset reads a reset duration: OpenAI writes Go-like durations
// ("1s", "6m0s", "20ms", "7.66s"); a bare number is seconds. Zero when
// unreadable.
func parseReset(v string) time.Duration {
	v = strings.TrimSpace(v)
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs > 0 && secs < 1e9 {
		return time.Duration(secs * float64(time.Second))
	}
	return 0
}
