// Package linearizability checks recorded histories of SubmitJob and GetJob
// against a sequential model of the idempotency contract, with porcupine
// (github.com/anishathalye/porcupine). A history is what many concurrent
// clients called and were answered, with the times of each call; the check
// asks whether some order of the calls, each taking effect at one instant
// between its call and its answer, explains every answer under the model.
//
// The model, per idempotency key:
//
//   - one job per key within the window: a key that holds a job answers
//     EXISTING with that job to the same request, and is refused
//     (IDEMPOTENCY_KEY_REUSED) to another request, until the window has
//     passed since the key was created; only then may a submit create a new
//     job under it (the janitor frees keys when it runs, so after the window
//     both answers are legal);
//   - a replay never sees a job that was not created: EXISTING names the
//     job the key created;
//   - a job, once created, is found by GetJob forever (the window frees the
//     key, never the job);
//   - a call that failed or timed out may or may not have taken effect, at
//     any time after it was made (a stalled commit lands late): the model
//     allows both.
package linearizability

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Op is the RPC of an operation.
type Op int

const (
	Submit Op = iota // SubmitJob
	Get              // GetJob
)

// Input is one call.
type Input struct {
	Op  Op
	Key string // the idempotency key; for Get, the key whose job is read
	// Request names the submitted request (e.g. which of the key's
	// documents): equal names have equal fingerprints.
	Request string
	JobID   string // Get: the job read
	// Call and Return are the client's times (ns) of the call and the
	// answer; Return is Unanswered for a call whose outcome is unknown.
	Call, Return int64
}

// Unanswered is the Return of a call that failed or timed out: its effect,
// if any, may come at any time after its call.
const Unanswered = math.MaxInt64

// Outcome is how a call was answered.
type Outcome int

const (
	Failed   Outcome = iota // no answer: an error other than the ones below
	Created                 // SubmitJob: CREATED or DEDUPLICATED (a new job)
	Existing                // SubmitJob: EXISTING
	Reused                  // SubmitJob: INVALID_ARGUMENT, IDEMPOTENCY_KEY_REUSED
	Found                   // GetJob: the job
	NotFound                // GetJob: NOT_FOUND
)

func (o Outcome) String() string {
	return [...]string{"failed", "created", "existing", "reused", "found", "not found"}[o]
}

// Output is the answer to a call.
type Output struct {
	Outcome Outcome
	JobID   string // Created, Existing: the job answered
	JobKey  string // Found: the job's idempotency key
}

// keyState is what the model knows of one key. It is comparable, so
// porcupine's default equality serves.
type keyState struct {
	held    bool   // the key holds a job
	job     string // the held job; "" while only a failed call may have made it
	request string // the request that created the held job
	since   int64  // call time of the call that created it: a lower bound of its creation
	jobs    string // every job the key created, sorted, comma-separated
	unnamed int    // jobs created by failed calls whose id no answer named yet
}

func (s keyState) created(id string) bool {
	return id != "" && slices.Contains(strings.Split(s.jobs, ","), id)
}

func (s keyState) withJob(id string) string {
	if id == "" {
		return s.jobs
	}
	ids := []string{id}
	if s.jobs != "" {
		ids = append(strings.Split(s.jobs, ","), id)
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

// step returns every state the key may be in after the call, none if the
// answer is impossible.
func step(s keyState, in Input, out Output, window time.Duration) []keyState {
	switch in.Op {
	case Submit:
		// The janitor may have freed the key before this call took effect
		// only if the window has passed since the key's creation by then.
		freeable := s.held && (in.Return == Unanswered || in.Return >= s.since+int64(window))
		fresh := func(id string) keyState {
			n := keyState{held: true, job: id, request: in.Request, since: in.Call, jobs: s.withJob(id), unnamed: s.unnamed}
			if id == "" {
				n.unnamed++
			}
			return n
		}
		switch out.Outcome {
		case Created:
			if (!s.held || freeable) && !s.created(out.JobID) {
				return []keyState{fresh(out.JobID)}
			}
		case Existing:
			if !s.held || s.request != in.Request {
				return nil
			}
			if s.job == out.JobID {
				return []keyState{s}
			}
			if s.job == "" && !s.created(out.JobID) { // names the job a failed call created
				named := s
				named.job, named.jobs, named.unnamed = out.JobID, s.withJob(out.JobID), s.unnamed-1
				return []keyState{named}
			}
		case Reused:
			if s.held && s.request != in.Request {
				return []keyState{s}
			}
		case Failed:
			next := []keyState{s} // it did nothing (yet)
			if !s.held || freeable {
				next = append(next, fresh("")) // it created a job we never heard of
			}
			return next
		}
	case Get:
		switch out.Outcome {
		case Found:
			if out.JobKey == in.Key && (s.created(in.JobID) || s.unnamed > 0) {
				return []keyState{s}
			}
		case NotFound:
			if !s.created(in.JobID) { // a created job is never lost
				return []keyState{s}
			}
		case Failed:
			return []keyState{s}
		}
	}
	return nil
}

// Model is the idempotency contract with keys remembered for window, for
// porcupine; histories are partitioned by key.
func Model(window time.Duration) porcupine.Model { return model(window, step) }

type stepFunc func(s keyState, in Input, out Output, window time.Duration) []keyState

func model(window time.Duration, step stepFunc) porcupine.Model {
	nd := porcupine.NondeterministicModel{
		Partition: partitionByKey,
		Init:      func() []any { return []any{keyState{}} },
		Step: func(state, input, output any) []any {
			var next []any
			for _, s := range step(state.(keyState), input.(Input), output.(Output), window) {
				next = append(next, s)
			}
			return next
		},
		Hash:              hashState,
		DescribeOperation: describeOperation,
		DescribeState:     describeState,
	}
	return nd.ToModel()
}

func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	var keys []string
	for _, op := range history {
		k := op.Input.(Input).Key
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], op)
	}
	parts := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, byKey[k])
	}
	return parts
}

func describeOperation(input, output any) string {
	in, out := input.(Input), output.(Output)
	switch in.Op {
	case Submit:
		s := fmt.Sprintf("submit(%s, %s) -> %s", in.Key, in.Request, out.Outcome)
		if out.JobID != "" {
			s += " " + short(out.JobID)
		}
		return s
	default:
		s := fmt.Sprintf("get(%s) -> %s", short(in.JobID), out.Outcome)
		if out.Outcome == Found {
			s += " of " + out.JobKey
		}
		return s
	}
}

func describeState(state any) string {
	k := state.(keyState)
	if !k.held {
		return fmt.Sprintf("free (jobs %s)", shortList(k.jobs))
	}
	job := short(k.job)
	if job == "" {
		job = "?"
	}
	return fmt.Sprintf("holds %s for %s (jobs %s, %d unnamed)", job, k.request, shortList(k.jobs), k.unnamed)
}

func hashState(state any) uint64 {
	k := state.(keyState)
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%t|%s|%s|%d|%s|%d", k.held, k.job, k.request, k.since, k.jobs, k.unnamed)
	return h.Sum64()
}

func short(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}

func shortList(ids string) string {
	if ids == "" {
		return "none"
	}
	var out []string
	for _, id := range strings.Split(ids, ",") {
		out = append(out, short(id))
	}
	return strings.Join(out, ",")
}
