package linearizability

import (
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// History records operations from many goroutines.
type History struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

// NewHistory starts an empty history; times are measured from now.
func NewHistory() *History { return &History{start: time.Now()} }

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
	h.mu.Unlock()
	return out
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
	n := map[Outcome]int{}
	for _, op := range h.ops {
		n[op.Output.(Output).Outcome]++
	}
	return n
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
