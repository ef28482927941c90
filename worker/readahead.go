package worker

import "github.com/oncejob/oncejob/store"

// readAhead is what one read of the decision cache answered before the
// attempt's first LLM call: the cached result of every stage key known
// then, and the dedup re-check the first call would have made
// (docs/architecture.md, "The batched engine").
type readAhead struct {
	// found holds the cache's answers; a key in known but not in found
	// has no cached result.
	found map[string]*store.Checkpoint
	known map[string]bool
	// dedupChecked: the read just checked the dedup key (computedBy its
	// answer), so the next LLM call need not read it again.
	dedupChecked bool
	computedBy   string
}

func newReadAhead() readAhead {
	return readAhead{found: map[string]*store.Checkpoint{}, known: map[string]bool{}}
}

// record keeps what the read of keys answered.
func (a *readAhead) record(keys []string, answer *store.CheckpointGetByStageKeysResult) {
	a.dedupChecked, a.computedBy = true, answer.ComputedBy
	for _, key := range keys {
		a.known[key] = true
		if cp, ok := answer.Checkpoints[key]; ok {
			a.found[key] = cp
		}
	}
}

// know records that key has no cached result to read.
func (a *readAhead) know(key string) { a.known[key] = true }

// lookup is the read's answer for key: its cached result (nil: none) when
// the read answered for key (ok).
func (a *readAhead) lookup(key string) (_ *store.Checkpoint, ok bool) {
	if cp, ok := a.found[key]; ok {
		return cp, true
	}
	return nil, a.known[key]
}

// takeDedupCheck returns the read's dedup re-check, once: checked reports
// whether there is one, computedBy the job that computed the job's dedup
// key's success ("": none).
func (a *readAhead) takeDedupCheck() (computedBy string, checked bool) {
	if !a.dedupChecked {
		return "", false
	}
	a.dedupChecked = false
	return a.computedBy, true
}
