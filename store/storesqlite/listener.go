package storesqlite

import (
	"context"
	"fmt"
	"sync"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// listenTailBatch is how many events the tail reads a query.
const listenTailBatch = 1000

// JobEventListen implements store.WatchStore. Every write to the database
// is made by this process, so notifications need not cross a connection as
// Postgres's do: a write transaction that appended events wakes every
// listener once it has committed (inWriteTx), and a listener then reads the
// log after the last id it sent and notifies each event it finds, in commit
// order. The writer never waits for a listener: a listener holds at most
// one pending wake-up, which covers every commit since, so a caller slow to
// receive delays only its own notifications (the listener blocks on the
// full channel, as the contract says) and never a write. As the log itself
// is read, nothing is lost or sent twice; the read every PollInterval only
// matters after a read failed.
//
// The listener joins the store's set before it reads the end of the log, so
// any commit after that read wakes it.
func (s *Store) JobEventListen(ctx context.Context, params *store.JobEventListenParams) (<-chan store.JobEventNotification, error) {
	p := params.WithDefaults()
	l := &listener{s: s, wake: make(chan struct{}, 1)}
	s.listeners.add(l)
	end, err := s.q.JobEventLastID(ctx, s.read)
	if err != nil {
		s.listeners.remove(l)
		return nil, fmt.Errorf("storesqlite: listen: %w", interpretError(err))
	}
	l.after = end
	l.out = make(chan store.JobEventNotification, p.Buffer)
	go func() {
		defer close(l.out)
		defer s.listeners.remove(l)
		store.RunTail(ctx, p, l.wake, l.tail)
	}()
	return l.out, nil
}

// listeners is the set of a store's running JobEventListen sources.
type listeners struct {
	mu  sync.Mutex
	set map[*listener]struct{}
}

func (ls *listeners) add(l *listener) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.set == nil {
		ls.set = make(map[*listener]struct{})
	}
	ls.set[l] = struct{}{}
}

func (ls *listeners) remove(l *listener) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	delete(ls.set, l)
}

// wake tells every listener that the log has grown, without waiting.
func (ls *listeners) wake() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for l := range ls.set {
		select {
		case l.wake <- struct{}{}:
		default: // a wake-up is already pending; its read will see this commit
		}
	}
}

type listener struct {
	s     *Store
	wake  chan struct{} // capacity 1: "the log may have grown"
	out   chan store.JobEventNotification
	after int64 // the id of the last event sent; only the tail touches it
}

// tail notifies the events after l.after, up to the end of the log.
func (l *listener) tail(ctx context.Context) error {
	for {
		rows, err := l.s.q.JobEventTail(ctx, l.s.read, dbsqlite.JobEventTailParams{
			AfterID: l.after,
			Max:     listenTailBatch,
		})
		if err != nil {
			return interpretError(err)
		}
		for _, r := range rows {
			select {
			case l.out <- store.JobEventNotification{Tenant: r.Tenant, JobID: r.JobID, Seq: int32(r.Seq)}:
			case <-ctx.Done():
				return ctx.Err()
			}
			l.after = r.ID
		}
		if len(rows) < listenTailBatch {
			return nil
		}
	}
}
