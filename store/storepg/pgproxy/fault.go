package pgproxy

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Action is what a fault does to the connection that executes its
// statement.
type Action int

const (
	// CutBefore cuts the connection instead of forwarding the statement: it
	// never runs, and the client sees its connection drop.
	CutBefore Action = iota
	// CutAfter forwards the statement and cuts the connection once the
	// server has answered it in full (ReadyForQuery), dropping the answer:
	// the statement ran — and committed, outside an explicit transaction —
	// but the client cannot know.
	CutAfter
	// StallBefore holds the statement, and everything after it on its
	// connection, for Duration, then forwards it: it runs late.
	StallBefore
	// StallCommit forwards the statement but holds the Sync that ends it for
	// Duration: the statement has run and holds its row locks, and its
	// implicit transaction commits only when the Sync arrives. On a simple
	// query ("commit") it is StallBefore.
	StallCommit
	// Partition stalls every connection of the proxy for Duration, starting
	// with this statement, which is held too: the database is unreachable
	// from the moment the statement is sent.
	Partition
)

func (a Action) String() string {
	return [...]string{"cut before", "cut after", "stall before", "stall commit", "partition"}[a]
}

// Fault acts on the next statements that match.
type Fault struct {
	// Statement names the statement: a sqlc query name ("JobClaim" matches
	// "-- name: JobClaim :many ..."), or the whole text of a simple query,
	// case-insensitive ("commit").
	Statement string
	Action    Action
	// Duration of a stall or partition.
	Duration time.Duration
	// Times is how many executions it acts on; 0 means 1.
	Times int
}

// Injection is an armed Fault.
type Injection struct {
	fault Fault
	left  atomic.Int64 // matches still to take
	fired atomic.Int64 // actions completed
	first chan struct{}
	once  sync.Once

	released    chan struct{} // closed by Release: stalls end now
	releaseOnce sync.Once
}

// Inject arms f: the next f.Times executions of its statement, on any
// connection, suffer its action.
func (p *Proxy) Inject(f Fault) *Injection {
	if f.Times <= 0 {
		f.Times = 1
	}
	in := &Injection{fault: f, first: make(chan struct{}), released: make(chan struct{})}
	in.left.Store(int64(f.Times))
	p.mu.Lock()
	p.faults = append(p.faults, in)
	p.mu.Unlock()
	return in
}

// Fired is closed when the fault has acted once (for CutAfter: once the
// statement ran and the connection was cut).
func (in *Injection) Fired() <-chan struct{} { return in.first }

// Release ends the fault's stalls and partitions now, those under way and
// those to come, instead of at the end of Duration: a test that gives a
// stall a long Duration and releases it once it has seen what it checks
// does not race the stall's end on a slow machine.
func (in *Injection) Release() { in.releaseOnce.Do(func() { close(in.released) }) }

// Count is how many times the fault has acted.
func (in *Injection) Count() int { return int(in.fired.Load()) }

func (in *Injection) fire() {
	in.fired.Add(1)
	in.once.Do(func() { close(in.first) })
}

// match returns the first armed fault whose statement is sql, taking one of
// its executions, or nil.
func (p *Proxy) match(sql string) *Injection {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, in := range p.faults {
		if !matches(in.fault.Statement, sql) {
			continue
		}
		if in.left.Add(-1) <= 0 {
			p.faults = slices.Delete(p.faults, i, i+1)
		}
		return in
	}
	return nil
}

func matches(name, sql string) bool {
	if strings.HasPrefix(sql, "-- name: ") {
		rest := sql[len("-- name: "):]
		return strings.HasPrefix(rest, name+" ") || strings.HasPrefix(rest, name+"\n")
	}
	return strings.EqualFold(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(sql), ";")), name)
}
