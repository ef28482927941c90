package watch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncejob/oncejob/store"
)

// readTimeout bounds a shared read, which runs on after the watcher that
// started it has gone.
const readTimeout = 30 * time.Second

// readGroup runs one read per key at a time; callers asking for a key being
// read share that read's result (read-only) — if it is recent enough.
//
// A watcher woken by a notification must read from a query that started
// after the notification, else the query may predate the commit it
// announces and the wake-up is spent for nothing. So the hub counts
// notifications (epoch, incremented before the wake-ups are sent), each
// read records the epoch it started at, and a caller only joins a read that
// started at or after the epoch it observed when it woke.
type readGroup struct {
	epoch *atomic.Uint64
	mu    sync.Mutex
	calls map[string]*readCall
}

type readCall struct {
	epoch  uint64 // h.epoch when the read started, or earlier
	done   chan struct{}
	events []*store.JobEvent
	err    error
	// waiters counts the callers waiting on this read; guarded by the
	// group's mu (tests wait on it instead of sleeping).
	waiters int
}

func (g *readGroup) do(ctx context.Context, key string, need uint64, read func(context.Context) ([]*store.JobEvent, error)) ([]*store.JobEvent, error) {
	for {
		g.mu.Lock()
		if g.calls == nil {
			g.calls = make(map[string]*readCall)
		}
		c, ok := g.calls[key]
		if !ok {
			c = &readCall{epoch: g.epoch.Load(), done: make(chan struct{})}
			g.calls[key] = c
			g.mu.Unlock()
			// Detached from the caller: the others waiting must not fail
			// because the first one's client left.
			readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
			c.events, c.err = read(readCtx)
			cancel()
			g.mu.Lock()
			delete(g.calls, key)
			g.mu.Unlock()
			close(c.done)
			return c.events, c.err
		}
		c.waiters++
		g.mu.Unlock()
		select {
		case <-c.done:
			if c.epoch >= need {
				return c.events, c.err
			}
			// Too old for this caller: read again.
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
