// Package maintenance runs the store's background chores, each on a ticker
// until its context ends: today the sweep of expired idempotency keys.
// Chores are store-level and dialect-free: they call store methods with
// bounded batches, so any number of processes may run them at once.
package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/oncejob/oncejob/store"
)

// IdempotencyKeyWindowDefault is the default of
// IdempotencyKeySweeper.Window, and of the command's --idempotency-window.
const IdempotencyKeyWindowDefault = 24 * time.Hour

// IdempotencyKeySweeper frees idempotency keys older than the window, so a
// key can be used again after it; the jobs the keys created stay.
type IdempotencyKeySweeper struct {
	Store store.Store
	// Window is how long a key is remembered. Default:
	// IdempotencyKeyWindowDefault.
	Window time.Duration
	// Interval between sweeps. Default: Window/10, at least 1s, at most 1m.
	Interval time.Duration
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock the window is measured on. Default: time.Now.
	Now func() time.Time
}

func (s *IdempotencyKeySweeper) withDefaults() *IdempotencyKeySweeper {
	c := *s
	if c.Window == 0 {
		c.Window = IdempotencyKeyWindowDefault
	}
	if c.Interval == 0 {
		c.Interval = min(max(c.Window/10, time.Second), time.Minute)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &c
}

// Run sweeps at once and then every Interval until ctx is done.
func (s *IdempotencyKeySweeper) Run(ctx context.Context) {
	c := s.withDefaults()
	t := time.NewTicker(c.Interval)
	defer t.Stop()
	for {
		if n, err := c.Sweep(ctx); err != nil && ctx.Err() == nil {
			c.Logger.ErrorContext(ctx, "idempotency key sweep failed", "error", err)
		} else if n > 0 {
			c.Logger.DebugContext(ctx, "idempotency keys expired", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep frees every key created before Now - Window, in batches, and
// returns how many it freed.
func (s *IdempotencyKeySweeper) Sweep(ctx context.Context) (int64, error) {
	c := s.withDefaults()
	params := &store.IdempotencyKeyDeleteExpiredParams{CreatedBefore: c.Now().Add(-c.Window)}
	batch := int64(params.PageLimit())
	var total int64
	for {
		n, err := c.Store.IdempotencyKeyDeleteExpired(ctx, params)
		total += n
		if err != nil || n < batch {
			return total, err
		}
	}
}
