package watch

import (
	"context"
	"errors"

	"github.com/oncejob/oncejob/server/membudget"
	"github.com/oncejob/oncejob/store"
)

// ErrSlowConsumer ends a WatchJobs stream that fell further behind its
// tenant's changes than the hub keeps (Config.FeedBytes) because its
// client was not reading: the stream holds nothing for it. The client
// resumes from the cursor of the last change it was sent.
var ErrSlowConsumer = errors.New("watch: the client reads slower than its tenant's changes arrive")

// WatchJobs calls send with each change of the tenant's jobs after p.After
// that matches p's filters, in the store's global change order, until ctx
// is done, send fails, the store fails or the hub shuts down (it never
// returns nil). The cursor of the last change sent is where to resume.
//
// A stream behind the tenant's tail (an old cursor, or none) reads the
// store itself, a batch bounded in count and bytes (Config.ReadBytes,
// drawn from the memory budget) at a time, unfiltered so that its position
// advances over every change. At the tail it joins the tenant's feed, one
// shared reader woken by the tenant's notifications and the store's tail
// (which notifies an event once it is readable here, so an event held back
// by a concurrent transaction is sent when that transaction ends), and
// takes the changes it keeps one at a time. Should it fall behind what the
// feed keeps while it was sending, it ends with ErrSlowConsumer; should the
// budget not hold a change, with the budget's status.
func (h *Hub) WatchJobs(ctx context.Context, p *store.JobChangeListParams, send func(*store.JobChange) error) error {
	if err := h.stopped(ctx); err != nil {
		return err
	}
	select {
	case <-h.closing:
		return ErrShuttingDown
	default:
	}
	h.addActive(1)
	defer h.addActive(-1)
	hold := h.cfg.Budget.Hold("a watch's batch")
	defer hold.Release()

	pos := p.After
	var rowBytes int64 // the mean size of the changes this stream read; 0 before its first read
	var f *feed
	defer func() {
		if f != nil {
			f.leave()
		}
	}()
	fromFeed := false
	for {
		if f == nil {
			full, err := h.catchUp(ctx, p, &pos, &rowBytes, hold, send)
			if err != nil {
				return err
			}
			if !full {
				f = h.join(p.Tenant, pos)
			}
			continue
		}
		c, grew, behind, err := f.next(pos)
		switch {
		case err != nil:
			return err
		case behind && fromFeed:
			return ErrSlowConsumer
		case behind: // the feed started ahead of this stream: read up to it
			f.leave()
			f = nil
			continue
		case c == nil:
			select {
			case <-grew:
			case <-ctx.Done():
				return ctx.Err()
			case <-h.closing:
				return ErrShuttingDown
			}
			continue
		}
		fromFeed = true
		pos = c.Cursor
		if !matches(p, c) {
			continue
		}
		if err := hold.Grow(c.Bytes); err != nil {
			return err
		}
		err = send(c)
		hold.Release()
		if err != nil {
			return err
		}
	}
}

// catchUp reads one batch after *pos from the store and sends what
// matches, advancing *pos over every change read. full says more may
// follow at once. A tenant's catch-up reads take turns (Config.CatchUpReads
// at once), so a tenant's streams catching up share the store with every
// other tenant; and a read asks for about twice the changes its byte
// bound holds at the stream's mean change size (*rowBytes), as sizing a
// row costs the store its read.
func (h *Hub) catchUp(ctx context.Context, p *store.JobChangeListParams, pos *store.JobChangeCursor, rowBytes *int64, hold *membudget.Hold, send func(*store.JobChange) error) (full bool, err error) {
	if err := h.stopped(ctx); err != nil {
		return false, err
	}
	// The read's bound, and the one change it may return beyond it.
	if err := hold.Grow(h.cfg.ReadBytes); err != nil {
		return false, err
	}
	defer hold.Release()
	limit := h.cfg.BatchSize
	if *rowBytes > 0 {
		limit = int(min(int64(limit), max(1, 2*h.cfg.ReadBytes / *rowBytes)))
	}
	params := &store.JobChangeListParams{Tenant: p.Tenant, After: *pos, Limit: limit, MaxBytes: h.cfg.ReadBytes}
	release, err := h.catchUpTurn(ctx, p.Tenant)
	if err != nil {
		return false, err
	}
	changes, err := h.cfg.Store.JobChangeList(ctx, params)
	release()
	h.signals.ChangesRead.Signal(len(changes))
	if err != nil {
		return false, err
	}
	var n int64
	for _, c := range changes {
		n += c.Bytes
	}
	if len(changes) > 0 {
		*rowBytes = max(1, n/int64(len(changes)))
	}
	if over := n - h.cfg.ReadBytes; over > 0 {
		if err := hold.Grow(over); err != nil {
			return false, err
		}
	}
	full = store.JobChangesFull(changes, params)
	for i, c := range changes {
		if matches(p, c) {
			if err := send(c); err != nil {
				return false, err
			}
		}
		*pos = c.Cursor
		changes[i] = nil // sent: the collector may have it
	}
	return full, nil
}

// catchUpTurn waits for one of the tenant's catch-up read turns.
func (h *Hub) catchUpTurn(ctx context.Context, tenant string) (release func(), err error) {
	h.mu.Lock()
	turns := h.catchUps[tenant]
	if turns == nil {
		turns = &catchUpTurns{ch: make(chan struct{}, h.cfg.CatchUpReads)}
		h.catchUps[tenant] = turns
	}
	turns.users++
	h.mu.Unlock()
	done := func() {
		h.mu.Lock()
		if turns.users--; turns.users == 0 {
			delete(h.catchUps, tenant)
		}
		h.mu.Unlock()
	}
	select {
	case turns.ch <- struct{}{}:
		return func() { <-turns.ch; done() }, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	case <-h.closing:
		done()
		return nil, ErrShuttingDown
	}
}

// catchUpTurns are one tenant's catch-up read turns; users counts the
// reads holding or waiting for one (guarded by the hub's mu).
type catchUpTurns struct {
	ch    chan struct{}
	users int
}

// matches reports whether c passes p's filters.
func matches(p *store.JobChangeListParams, c *store.JobChange) bool {
	return (p.Status == "" || c.Event.Status == p.Status) && (p.Pipeline == "" || c.Job.Pipeline == p.Pipeline)
}
