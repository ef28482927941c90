package worker

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/oncejob/oncejob/pipeline"
)

// backoff is exponential with full jitter: a uniform wait in
// [0, min(max, initial * multiplier^(n-1))] before retry n (n >= 1), so
// workers that failed together do not retry together. A provider's
// Retry-After hint is a floor. jitter, in [0, 1), picks the point in the
// window (rand.Float64() in production; fixed in tests).
func backoff(p pipeline.RetryPolicy, n int32, retryAfter time.Duration, jitter float64) time.Duration {
	ceiling := float64(p.InitialBackoff) * math.Pow(p.Multiplier, float64(max(n-1, 0)))
	ceiling = math.Min(ceiling, float64(p.MaxBackoff))
	d := time.Duration(jitter * ceiling)
	return max(d, retryAfter)
}

// jitter is the production source of backoff's jitter.
func jitter() float64 { return rand.Float64() }
