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
// Retry-After hint is a floor.
func backoff(p pipeline.RetryPolicy, n int32, retryAfter time.Duration) time.Duration {
	ceiling := float64(p.InitialBackoff) * math.Pow(p.Multiplier, float64(max(n-1, 0)))
	ceiling = math.Min(ceiling, float64(p.MaxBackoff))
	d := time.Duration(rand.Float64() * ceiling)
	return max(d, retryAfter)
}
