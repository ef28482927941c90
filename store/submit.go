package store

import "context"

// The dialect-free rules of JobSubmitMany: what a store must do with
// submissions that share an intent, and JobSubmit as a call of one.

// JobSubmitDistinct writes submissions of distinct intents (no two share a
// tenant, method and key) and answers each, in order, as JobSubmitMany
// does. It is the one part of JobSubmitMany each store writes in its own
// dialect.
type JobSubmitDistinct func(ctx context.Context, jobs []*JobSubmitParams) ([]JobSubmitItem, error)

// intent is an idempotency key's scope: what makes two submissions one.
type intent struct{ tenant, method, key string }

func intentOf(p *JobSubmitParams) intent {
	return intent{p.Tenant, p.Method, p.IdempotencyKey}
}

// JobSubmitManyInRounds answers a JobSubmitMany call through submit, which
// only ever sees distinct intents. Each round submits the first pending
// submission of every intent; a later submission of the same intent is then
// answered from the first's answer where that decides it (the first was
// written or found: the key is bound to the first's fingerprint; or the
// first failed and the later one is the same request). What is left (the
// first was refused as a reuse, and the later one has another fingerprint,
// which may be the key's) goes to the next round. A call of distinct
// intents, the usual one, is one round.
func JobSubmitManyInRounds(ctx context.Context, params *JobSubmitManyParams, submit JobSubmitDistinct) (*JobSubmitManyResult, error) {
	jobs := params.Jobs
	items := make([]JobSubmitItem, len(jobs))
	pending := make([]int, len(jobs))
	for i := range pending {
		pending[i] = i
	}
	for len(pending) > 0 {
		first := make(map[intent]int, len(pending))
		var round, repeats []int
		for _, i := range pending {
			k := intentOf(jobs[i])
			if _, seen := first[k]; seen {
				repeats = append(repeats, i)
				continue
			}
			first[k] = i
			round = append(round, i)
		}
		batch := make([]*JobSubmitParams, len(round))
		for j, i := range round {
			batch[j] = jobs[i]
		}
		answers, err := submit(ctx, batch)
		if err != nil {
			return nil, err
		}
		for j, i := range round {
			items[i] = answers[j]
		}
		var next []int
		for _, i := range repeats {
			f := first[intentOf(jobs[i])]
			if item, ok := repeatAnswer(jobs[f], items[f], jobs[i]); ok {
				items[i] = item
			} else {
				next = append(next, i)
			}
		}
		pending = next
	}
	return &JobSubmitManyResult{Items: items}, nil
}

// repeatAnswer answers a later submission of first's intent from first's
// answer, when that answer decides it.
func repeatAnswer(first *JobSubmitParams, answer JobSubmitItem, repeat *JobSubmitParams) (JobSubmitItem, bool) {
	same := repeat.Fingerprint == first.Fingerprint
	switch {
	case answer.Err == nil && same:
		return JobSubmitItem{Job: answer.Job, Outcome: OutcomeExisting}, true
	case answer.Err == nil:
		return JobSubmitItem{Err: ErrIdempotencyKeyReused}, true // bound to first's fingerprint
	case same:
		return JobSubmitItem{Err: answer.Err}, true // the same request fails alike
	default:
		return JobSubmitItem{}, false // the key's fingerprint is not first's: ask the store
	}
}

// JobSubmitter is JobSubmit and JobSubmitMany over one store's
// JobSubmitDistinct: the rounds and the call of one submission are the
// same for every store, which embeds a JobSubmitter made with its own
// Distinct.
type JobSubmitter struct {
	Distinct JobSubmitDistinct
	// RunDefaults gives jobs of runs their runs' params and labels
	// (docs/architecture.md, "Runs"); nil leaves them as written.
	RunDefaults func(ctx context.Context, jobs ...*Job) error
}

// JobSubmit implements Store: a JobSubmitMany of one submission.
func (j JobSubmitter) JobSubmit(ctx context.Context, params *JobSubmitParams) (*JobSubmitResult, error) {
	return JobSubmitOne(ctx, j.JobSubmitMany, params)
}

// JobSubmitMany implements Store: JobSubmitManyInRounds over Distinct,
// each job answered with its run's defaults (RunDefaults), except the jobs
// that answer only submissions into a run: those come without params and
// labels (see JobSubmitParams.RunID).
func (j JobSubmitter) JobSubmitMany(ctx context.Context, params *JobSubmitManyParams) (*JobSubmitManyResult, error) {
	res, err := JobSubmitManyInRounds(ctx, params, j.Distinct)
	if err != nil || j.RunDefaults == nil {
		return res, err
	}
	return res, answerWithRunDefaults(ctx, j.RunDefaults, params.Jobs, res.Items)
}

// answerWithRunDefaults gives the jobs that answer a submission outside a
// run their runs' defaults, and leaves params and labels out of those that
// answer only submissions into a run (two submissions of one key share
// their answer's job).
func answerWithRunDefaults(ctx context.Context, runDefaults func(context.Context, ...*Job) error, jobs []*JobSubmitParams, items []JobSubmitItem) error {
	outside := make(map[*Job]bool, len(items))
	for i, it := range items {
		if it.Job != nil {
			outside[it.Job] = outside[it.Job] || jobs[i].RunID == ""
		}
	}
	var merge []*Job
	for job, out := range outside {
		if out {
			merge = append(merge, job)
		} else {
			job.Params, job.Labels = nil, nil
		}
	}
	return runDefaults(ctx, merge...)
}

// JobSubmitOne is JobSubmit as a JobSubmitMany call of one submission.
func JobSubmitOne(ctx context.Context, submitMany func(context.Context, *JobSubmitManyParams) (*JobSubmitManyResult, error), params *JobSubmitParams) (*JobSubmitResult, error) {
	res, err := submitMany(ctx, &JobSubmitManyParams{Jobs: []*JobSubmitParams{params}})
	if err != nil {
		return nil, err
	}
	item := res.Items[0]
	if item.Err != nil {
		return nil, item.Err
	}
	return &JobSubmitResult{Job: item.Job, Outcome: item.Outcome}, nil
}

// JobSubmitExisting answers a submission whose key is bound to fingerprint
// and job: the job as a replay, or ErrIdempotencyKeyReused.
func JobSubmitExisting(want, fingerprint string, job *Job) (*JobSubmitResult, error) {
	if fingerprint != want {
		return nil, ErrIdempotencyKeyReused
	}
	return &JobSubmitResult{Job: job, Outcome: OutcomeExisting}, nil
}
