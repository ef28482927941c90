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
	var f *feed
	defer func() {
		if f != nil {
			f.leave()
		}
	}()
	fromFeed := false
	for {
		if f == nil {
			full, err := h.catchUp(ctx, p, &pos, hold, send)
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
// follow at once.
func (h *Hub) catchUp(ctx context.Context, p *store.JobChangeListParams, pos *store.JobChangeCursor, hold *membudget.Hold, send func(*store.JobChange) error) (full bool, err error) {
	if err := h.stopped(ctx); err != nil {
		return false, err
	}
	// The read's bound, and the one change it may return beyond it.
	if err := hold.Grow(h.cfg.ReadBytes); err != nil {
		return false, err
	}
	defer hold.Release()
	params := &store.JobChangeListParams{Tenant: p.Tenant, After: *pos, Limit: h.cfg.BatchSize, MaxBytes: h.cfg.ReadBytes}
	changes, err := h.cfg.Store.JobChangeList(ctx, params)
	h.signals.ChangesRead.Signal(len(changes))
	if err != nil {
		return false, err
	}
	var n int64
	for _, c := range changes {
		n += c.Bytes
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

// matches reports whether c passes p's filters.
func matches(p *store.JobChangeListParams, c *store.JobChange) bool {
	return (p.Status == "" || c.Event.Status == p.Status) && (p.Pipeline == "" || c.Job.Pipeline == p.Pipeline)
}
