package watch

import (
	"context"
	"sync"
	"time"
)

// SharedParams names what WatchShared watches.
type SharedParams struct {
	// Tenant whose job changes may change the value.
	Tenant string
	// Key names the value within the tenant (a run's id): the watches of
	// one tenant and key share one reader.
	Key string
}

// WatchShared watches a value that the tenant's job changes may change —
// a run's progress — through one reader per tenant and key in this
// process, shared by every watch of that value: the reader calls read at
// once, again after the tenant's notifications (at most once per
// Config.SharedMinInterval) and after Config.SharedIdleInterval without
// one, for what the value depends on besides the job log. So N watches of
// one value cost one read per notification, not N (docs/architecture.md,
// "Watching").
//
// read must depend on p alone: it runs detached from ctx, the first
// watch's read serving every later one, and the value it returns is
// shared, so read-only. It reports done when no later read can matter.
// send is called with the first value the watch sees and then with each
// newer one (values read while it was sending fold into the latest),
// until send reports done, read fails (every watch of the value gets the
// error), ctx ends or the hub shuts down (ErrShuttingDown).
func (h *Hub) WatchShared(ctx context.Context, p *SharedParams, read func(ctx context.Context) (v any, done bool, err error), send func(v any) (done bool, err error)) error {
	s, err := h.joinShared(p, read)
	if err != nil {
		return err
	}
	defer s.leave()
	var sent uint64
	for {
		s.mu.Lock()
		v, version, finished, err, changed := s.value, s.version, s.finished, s.err, s.changed
		s.mu.Unlock()
		if version > sent {
			sent = version
			done, sendErr := send(v)
			if sendErr != nil || done {
				return sendErr
			}
		}
		if finished {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-h.closing:
			return ErrShuttingDown
		}
	}
}

// shared is the reader of one tenant's value and what it last read.
type shared struct {
	h    *Hub
	p    SharedParams
	wake chan struct{} // capacity 1: a notification of the tenant
	done chan struct{} // closed when the last watch leaves

	mu       sync.Mutex
	watches  int
	version  uint64 // of value: how many reads succeeded
	value    any
	finished bool  // the reader stopped: value is the last, or err says why
	err      error // the read's failure that stopped the reader
	changed  chan struct{}
}

func (s *shared) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// joinShared registers a watch of p's value, starting its reader if none
// runs.
func (h *Hub) joinShared(p *SharedParams, read func(context.Context) (any, bool, error)) (*shared, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.closing:
		return nil, ErrShuttingDown
	default:
	}
	byKey := h.shared[p.Tenant]
	if byKey == nil {
		byKey = make(map[string]*shared)
		h.shared[p.Tenant] = byKey
	}
	s := byKey[p.Key]
	if s == nil {
		s = &shared{h: h, p: *p, wake: make(chan struct{}, 1), done: make(chan struct{}), changed: make(chan struct{})}
		byKey[p.Key] = s
		go s.run(read)
	}
	s.mu.Lock()
	s.watches++
	s.mu.Unlock()
	h.addActive(1)
	return s, nil
}

// leave unregisters a watch; the last one stops the reader.
func (s *shared) leave() {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	s.mu.Lock()
	s.watches--
	last := s.watches == 0
	s.mu.Unlock()
	if last {
		s.unlinkLocked()
		close(s.done)
	}
	h.addActive(-1)
}

// unlinkLocked removes s from the hub, if it is still there, so the next
// watch of its value starts a reader of its own. h.mu is held.
func (s *shared) unlinkLocked() {
	byKey := s.h.shared[s.p.Tenant]
	if byKey[s.p.Key] != s {
		return
	}
	delete(byKey, s.p.Key)
	if len(byKey) == 0 {
		delete(s.h.shared, s.p.Tenant)
	}
}

// run reads until read reports done or fails, or the last watch left or
// the hub shuts down.
func (s *shared) run(read func(context.Context) (any, bool, error)) {
	h := s.h
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.done:
		case <-h.closing:
		case <-ctx.Done():
		}
		cancel()
	}()
	for {
		readCtx, cancelRead := context.WithTimeout(ctx, readTimeout)
		v, done, err := read(readCtx)
		cancelRead()
		if ctx.Err() != nil {
			return // no watch left, or each ends with ErrShuttingDown
		}
		h.signals.SharedRead.Signal(s.p)
		if s.publish(v, done, err) {
			return
		}
		if !sleep(ctx, h.cfg.SharedMinInterval) {
			return
		}
		idle := time.NewTimer(h.cfg.SharedIdleInterval - h.cfg.SharedMinInterval)
		select {
		case <-s.wake:
		case <-idle.C:
		case <-ctx.Done():
		}
		idle.Stop()
	}
}

// publish hands a read's result to the watches; finished: the reader stops.
func (s *shared) publish(v any, done bool, err error) (finished bool) {
	s.mu.Lock()
	if err != nil {
		s.err = err
	} else {
		s.version++
		s.value = v
	}
	finished = err != nil || done
	s.finished = finished
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	if finished {
		s.h.mu.Lock()
		s.unlinkLocked()
		s.h.mu.Unlock()
	}
	return finished
}

// sleep waits for d, or reports false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
