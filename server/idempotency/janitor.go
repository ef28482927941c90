package idempotency

import (
	"context"
	"log/slog"
	"time"

	"github.com/oncejob/oncejob/store"
)

// Janitor frees idempotency keys older than the window, so a key can be used
// again after it; the jobs the keys created stay.
type Janitor struct {
	Store store.Store
	// Window is how long a key is remembered. Required.
	Window time.Duration
	// Interval between sweeps; 0 means Window/10, at least 1s, at most 1m.
	Interval time.Duration
	Logger   *slog.Logger
}

// Run sweeps until ctx is done.
func (j *Janitor) Run(ctx context.Context) {
	interval := j.Interval
	if interval == 0 {
		interval = min(max(j.Window/10, time.Second), time.Minute)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := j.Sweep(ctx); err != nil && ctx.Err() == nil {
			j.Logger.Error("idempotency janitor sweep failed", "error", err)
		} else if n > 0 {
			j.Logger.Debug("idempotency keys expired", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep frees every expired key, in batches, and returns how many.
func (j *Janitor) Sweep(ctx context.Context) (int64, error) {
	const batch = 1000
	var total int64
	for {
		n, err := j.Store.IdempotencyKeyDeleteExpired(ctx, &store.IdempotencyKeyDeleteExpiredParams{
			CreatedBefore: time.Now().Add(-j.Window),
			Limit:         batch,
		})
		total += n
		if err != nil || n < batch {
			return total, err
		}
	}
}
