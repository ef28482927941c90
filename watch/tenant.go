package watch

import (
	"context"
	"time"
)

// TenantParams configures WatchTenant.
type TenantParams struct {
	Tenant string
	// MinInterval is the least time between two reads: a busy tenant's
	// notifications fold into one read per interval. Default 250ms.
	MinInterval time.Duration
	// MaxInterval reads again without a notification after this long, for
	// what a read depends on besides the job log. Default 5s.
	MaxInterval time.Duration
}

// WatchTenant calls read at once and again after each change of the
// tenant's jobs, at most once per MinInterval, until read reports done, read
// fails, ctx ends or the hub shuts down (ErrShuttingDown). It is for
// watches of an aggregate (a run's progress) that re-read a summary rather
// than events: any number of notifications between two reads cost one
// read.
func (h *Hub) WatchTenant(ctx context.Context, p *TenantParams, read func(ctx context.Context) (done bool, err error)) error {
	minInterval, maxInterval := p.MinInterval, p.MaxInterval
	if minInterval <= 0 {
		minInterval = 250 * time.Millisecond
	}
	if maxInterval <= 0 {
		maxInterval = 5 * time.Second
	}
	sub, unsubscribe, err := h.subscribe(h.tenants, p.Tenant)
	if err != nil {
		return err
	}
	defer unsubscribe()
	for {
		if err := h.stopped(ctx); err != nil {
			return err
		}
		done, err := read(ctx)
		if err != nil || done {
			return err
		}
		pause := time.NewTimer(minInterval)
		select {
		case <-pause.C:
		case <-ctx.Done():
			pause.Stop()
			return ctx.Err()
		case <-h.closing:
			pause.Stop()
			return ErrShuttingDown
		}
		idle := time.NewTimer(maxInterval - minInterval)
		select {
		case <-sub.wake:
		case <-idle.C:
		case <-ctx.Done():
		case <-h.closing:
		}
		idle.Stop()
	}
}
