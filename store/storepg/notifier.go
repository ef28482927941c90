package storepg

import (
	"context"
	"strconv"
	"sync"
)

// notifier announces committed events to the LISTEN connections of every
// process (listener.go), after the transaction that appended them has
// committed and outside it. A NOTIFY inside the writing transaction would
// take Postgres's database-wide notify lock at its commit, queueing every
// transition behind every other; here the events of many transactions go
// out in one short transaction, and the writers never wait for it. A lost
// notification (a crash between commit and send, a failed send) is found by
// the listeners' tail of the log, so a send is a hint and is not retried.
type notifier struct {
	s       *Store
	start   sync.Once
	mu      sync.Mutex
	pending []string
	wake    chan struct{}
	stop    context.CancelFunc
	done    chan struct{}
}

// maxNotifyBatch bounds one send; NOTIFY payloads are small.
const maxNotifyBatch = 1000

// eventCommitted queues the announcement of a job's event with seq; 0 means
// the seq is unknown and watchers re-read.
func (s *Store) eventCommitted(tenant, jobID string, seq int64) {
	n := &s.notifier
	n.start.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		n.s, n.stop, n.wake, n.done = s, cancel, make(chan struct{}, 1), make(chan struct{})
		go n.run(ctx)
	})
	payload := jobID + " " + strconv.FormatInt(seq, 10) + " " + truncate(tenant, 1000)
	n.mu.Lock()
	n.pending = append(n.pending, payload)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) run(ctx context.Context) {
	defer close(n.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.wake:
		}
		for {
			n.mu.Lock()
			batch := n.pending[:min(len(n.pending), maxNotifyBatch)]
			n.pending = n.pending[len(batch):]
			if len(n.pending) == 0 {
				n.pending = nil
			}
			n.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			_ = n.s.q.JobEventNotify(ctx, n.s.hot(ctx), batch)
		}
	}
}

// close stops the notifier, if it ever started.
func (n *notifier) close() {
	n.start.Do(func() {}) // one never started stays stopped
	if n.stop != nil {
		n.stop()
		<-n.done
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
