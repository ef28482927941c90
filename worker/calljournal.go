package worker

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/oncejob/oncejob/store"
)

// callJournal is the attempt's side of the job's journal of LLM calls:
// what earlier attempts journaled per provider key (read once, at the
// first call of a job's second attempt or later), and the tokens this
// attempt billed, which the token budget counts.
type callJournal struct {
	st         store.EngineStore
	jobID      string
	jobAttempt int32
	earlier    map[string]keyHistory // nil: not read yet
	tokens     int64
}

func newCallJournal(st store.EngineStore, job *store.Job) callJournal {
	return callJournal{st: st, jobID: job.ID, jobAttempt: job.Attempt}
}

type keyHistory struct {
	counted bool // a billed call under the key is in the job's usage
	unknown bool // the last attempt under the key had an unknown outcome
	// batchTag names the provider batch the last attempt sent the call in.
	batchTag string
}

// bill counts tokens a call of this attempt billed.
func (j *callJournal) bill(tokens int64) { j.tokens += tokens }

// billed is the tokens this attempt billed.
func (j *callJournal) billed() int64 { return j.tokens }

// history returns what earlier attempts of the job journaled under key.
func (j *callJournal) history(ctx context.Context, key string) (keyHistory, error) {
	if j.jobAttempt <= 1 {
		return keyHistory{}, nil
	}
	if j.earlier == nil {
		attempts, err := j.st.LLMAttemptList(ctx, &store.LLMAttemptListParams{JobID: j.jobID})
		if err != nil {
			return keyHistory{}, err
		}
		j.earlier = foldJournal(attempts)
	}
	return j.earlier[key], nil
}

// foldJournal folds a job's journal into each provider key's history,
// attempt by attempt (then in row order): the batch a call waits for is
// named by the last attempt that journaled it, never by a row an earlier
// attempt wrote late (docs/architecture.md, "Provider batches").
func foldJournal(attempts []*store.LLMAttempt) map[string]keyHistory {
	slices.SortStableFunc(attempts, func(a, b *store.LLMAttempt) int { return cmp.Compare(a.JobAttempt, b.JobAttempt) })
	byKey := map[string]keyHistory{}
	for _, a := range attempts {
		h := byKey[a.ProviderKey]
		h.counted = h.counted || a.Billed
		if !answeredInBatch(a) {
			// A call left by a stopped attempt stays in its batch, and
			// so does an answer journaled by an attempt whose lease was
			// taken over as it applied it (the journal is unfenced,
			// the checkpoint is not): the answer is read again from
			// that batch, never asked in a new one.
			h.batchTag = ""
		}
		if tag, ok := strings.CutPrefix(a.Error, intentPrefix); ok && a.Outcome == store.LLMOutcomeOutcomeUnknown {
			// Sent in a batch: its answer comes with the batch, never
			// by an online lookup.
			h.batchTag, h.unknown = tag, false
			byKey[a.ProviderKey] = h
			continue
		}
		switch a.Outcome {
		case store.LLMOutcomeSucceeded:
			h.unknown = false
		case store.LLMOutcomeOutcomeUnknown, store.LLMOutcomeCancelled:
			// A call cut off after it was sent may have finished at the
			// provider; it stays unknown until an answer is journaled.
			h.unknown = true
		}
		byKey[a.ProviderKey] = h
	}
	return byKey
}

// answeredInBatch reports whether journal row a leaves its call in the
// batch of the intent before it: a stopped attempt's row, or the answer of
// a batch line (docs/architecture.md, "Provider batches").
func answeredInBatch(a *store.LLMAttempt) bool {
	return a.Outcome == store.LLMOutcomeCancelled ||
		(a.Outcome == store.LLMOutcomeSucceeded && a.PriceClass == store.PriceClassBatch)
}
