package watch

import (
	"context"
	"sort"
	"sync"

	"github.com/oncejob/oncejob/store"
)

// feed is the shared tail of one tenant's change log in this process: one
// reader, woken by the tenant's notifications, reads each new change once
// and keeps the latest (up to Config.FeedBytes, drawn from the memory
// budget) for every WatchJobs stream of the tenant to send from. So N
// streams at the tail cost one store read per notification, not N, and a
// stream holds no batch of its own: it takes one change at a time.
//
// Invariant: every change of the tenant after base, up to tail, is in
// entries, oldest first. A stream at a position at or after base sends
// from entries; one before base (it started from an old cursor, or fell
// behind while the feed dropped what it had not sent) reads the store.
type feed struct {
	h      *Hub
	tenant string
	wake   chan struct{} // capacity 1: a notification, or a stream joined
	done   chan struct{} // closed when the last stream leaves

	mu      sync.Mutex
	started bool // base is set
	base    store.JobChangeCursor
	tail    store.JobChangeCursor
	entries []*store.JobChange
	bytes   int64         // of entries, drawn from the budget
	grew    chan struct{} // closed, and replaced, when entries grow or err is set
	err     error         // the last read's failure, cleared by the next success
	streams int
}

func (f *feed) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// join registers a stream at pos, starting the feed there if it has not
// started, and makes the reader read what came since.
func (h *Hub) join(tenant string, pos store.JobChangeCursor) *feed {
	h.mu.Lock()
	f := h.feeds[tenant]
	if f == nil {
		f = &feed{h: h, tenant: tenant, wake: make(chan struct{}, 1), done: make(chan struct{}), grew: make(chan struct{})}
		h.feeds[tenant] = f
		go f.run()
	}
	f.mu.Lock()
	f.streams++
	f.err = nil // a failed read is tried again for the newcomer
	if !f.started {
		f.started, f.base, f.tail = true, pos, pos
	}
	f.mu.Unlock()
	h.mu.Unlock()
	f.signal()
	h.signals.Joined.Signal(tenant)
	return f
}

// leave unregisters a stream; the last one stops the feed.
func (f *feed) leave() {
	h := f.h
	h.mu.Lock()
	defer h.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.streams--
	if f.streams == 0 {
		delete(h.feeds, f.tenant)
		close(f.done)
	}
}

// next returns the first change after pos, or nil and a channel closed
// when there may be one; behind when changes after pos are no longer
// kept; or the reader's failure.
func (f *feed) next(pos store.JobChangeCursor) (c *store.JobChange, grew <-chan struct{}, behind bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pos.Less(f.base) {
		return nil, nil, true, nil
	}
	i := sort.Search(len(f.entries), func(i int) bool { return pos.Less(f.entries[i].Cursor) })
	if i < len(f.entries) {
		return f.entries[i], nil, false, nil
	}
	if f.err != nil {
		return nil, nil, false, f.err
	}
	return nil, f.grew, false, nil
}

// run is the feed's reader: after each wake-up it reads the tenant's
// changes after its tail until a read is not full, and keeps them.
func (f *feed) run() {
	h := f.h
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-f.done:
		case <-h.closing:
		}
		cancel()
	}()
	defer f.drop()
	for {
		select {
		case <-f.wake:
		case <-ctx.Done():
			return
		}
		for ctx.Err() == nil {
			full, err := f.read(ctx)
			if err != nil || !full {
				break
			}
		}
	}
}

// read reads once after the tail and appends what it found.
func (f *feed) read(ctx context.Context) (full bool, err error) {
	h := f.h
	f.mu.Lock()
	after := f.tail
	f.mu.Unlock()
	params := &store.JobChangeListParams{Tenant: f.tenant, After: after, Limit: h.cfg.BatchSize, MaxBytes: h.cfg.ReadBytes}
	changes, err := h.cfg.Store.JobChangeList(ctx, params)
	h.signals.ChangesRead.Signal(len(changes))
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.err = err
		f.broadcast()
		return false, err
	}
	f.err = nil
	if len(changes) == 0 {
		return false, nil
	}
	var n int64
	for _, c := range changes {
		n += c.Bytes
	}
	// Make room: the oldest changes go first, as the bound says. What the
	// budget cannot hold even then is not kept: the streams at the tail
	// end with the budget's status (each resumes by cursor) and the next
	// wake-up reads it again.
	acquired := false
	for {
		if (f.bytes+n <= h.cfg.FeedBytes || len(f.entries) == 0) && h.cfg.Budget.TryAcquire(n) {
			acquired = true
			break
		}
		if len(f.entries) == 0 {
			break
		}
		f.evictOldest()
	}
	if !acquired {
		f.err = h.cfg.Budget.Exhausted("the changes of a watch", n)
		f.broadcast()
		return false, f.err
	}
	f.bytes += n
	f.entries = append(f.entries, changes...)
	f.tail = changes[len(changes)-1].Cursor
	f.broadcast()
	return store.JobChangesFull(changes, params), nil
}

// evictOldest drops the oldest change kept, gives back its bytes and moves
// base past it. f.mu is held.
func (f *feed) evictOldest() {
	c := f.entries[0]
	f.entries[0] = nil
	f.entries = f.entries[1:]
	f.bytes -= c.Bytes
	f.h.cfg.Budget.Release(c.Bytes)
	f.base = c.Cursor
}

func (f *feed) broadcast() {
	close(f.grew)
	f.grew = make(chan struct{})
}

// drop gives back everything the feed holds once it stopped.
func (f *feed) drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.h.cfg.Budget.Release(f.bytes)
	f.entries, f.bytes = nil, 0
	f.err = ErrShuttingDown
	f.broadcast()
}
