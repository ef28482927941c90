package linearizability

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// History records operations from many goroutines.
type History struct {
	mu      sync.Mutex
	start   time.Time
	ops     []porcupine.Operation
	counts  map[Outcome]int
	waiters []waiter
}

// waiter is a Reached channel, closed once count operations ended with
// outcome.
type waiter struct {
	outcome Outcome
	count   int
	ch      chan struct{}
}

// NewHistory starts an empty history; times are measured from now.
func NewHistory() *History { return &History{start: time.Now(), counts: map[Outcome]int{}} }

// Start is when the history began.
func (h *History) Start() time.Time { return h.start }

func (h *History) now() int64 { return int64(time.Since(h.start)) }

// Record makes the call do as client, timing it, and records it. An answer
// whose outcome is Failed is recorded as unanswered: it may take effect at
// any time after its call.
func (h *History) Record(client int, in Input, do func() Output) Output {
	in.Call = h.now()
	out := do()
	in.Return = h.now()
	ret := in.Return
	if out.Outcome == Failed {
		in.Return = Unanswered
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: in.Call, Output: out, Return: ret})
	h.counts[out.Outcome]++
	h.waiters = slices.DeleteFunc(h.waiters, h.reached)
	h.mu.Unlock()
	return out
}

// Reached returns a channel closed once count operations have ended with
// outcome (at once if they already have).
func (h *History) Reached(outcome Outcome, count int) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := waiter{outcome: outcome, count: count, ch: make(chan struct{})}
	if !h.reached(w) {
		h.waiters = append(h.waiters, w)
	}
	return w.ch
}

// reached closes w's channel when its count is reached; h.mu is held.
func (h *History) reached(w waiter) bool {
	if h.counts[w.outcome] < w.count {
		return false
	}
	close(w.ch)
	return true
}

// Operations returns the history for porcupine: an unanswered call returns
// after every other operation, so its effect may land anywhere after it
// was made.
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	ops := make([]porcupine.Operation, len(h.ops))
	copy(ops, h.ops)
	var end int64
	for _, op := range ops {
		end = max(end, op.Return)
	}
	for i := range ops {
		if ops[i].Input.(Input).Return == Unanswered {
			ops[i].Return = end + 1
		}
	}
	return ops
}

// Counts returns how many operations ended with each outcome.
func (h *History) Counts() map[Outcome]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.counts)
}

// Check checks ops against model within timeout. On anything but Ok it
// writes porcupine's visualisation of the history into the directory
// artifacts returns (when artifacts is not nil; it is called only then, so
// a passing check leaves nothing behind) and returns its path.
func Check(model porcupine.Model, ops []porcupine.Operation, timeout time.Duration, artifacts func() string) (porcupine.CheckResult, string, error) {
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	if res == porcupine.Ok || artifacts == nil {
		return res, "", nil
	}
	dir := artifacts()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return res, "", err
	}
	path := filepath.Join(dir, "linearizability.html")
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		return res, "", err
	}
	return res, path, nil
}
