package worker

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/oncejob/oncejob/failpoint"
	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/pace"
	"github.com/oncejob/oncejob/store"
)

type promptData struct {
	Text   string
	Chunk  int // 1-based
	Chunks int
	Params map[string]any
}

// generate makes one chunk's LLM call, after checking again that no other
// job has computed the result meanwhile.
func (r *run) generate(ctx context.Context, chunk int32, chunks int, text string, responseFormat []byte) ([]byte, *store.LLMAttempt, error) {
	if computedBy, checked := r.ahead.takeDedupCheck(); checked {
		if computedBy != "" && computedBy != r.job.ID {
			return nil, nil, errAlreadyComputed
		}
	} else if other, err := r.w.cfg.Store.JobComputedSuccessGet(ctx, &store.JobComputedSuccessGetParams{Tenant: r.job.Tenant, DedupKey: r.job.DedupKey}); err == nil && other.ID != r.job.ID {
		return nil, nil, errAlreadyComputed
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, nil, err
	}
	tmpl, err := r.w.template(r.p)
	if err != nil {
		return nil, nil, permanent("PROMPT_TEMPLATE_INVALID", "%w", err)
	}
	var params map[string]any
	_ = json.Unmarshal(r.job.Params, &params)
	var prompt strings.Builder
	if err := tmpl.Execute(&prompt, promptData{Text: text, Chunk: int(chunk) + 1, Chunks: chunks, Params: params}); err != nil {
		return nil, nil, permanent("PROMPT_TEMPLATE_INVALID", "%w", err)
	}
	resp, attempt, err := r.call(ctx, llmCall{
		stage: store.JobStageLLMDone, chunk: chunk,
		messages: []llm.Message{{Role: "user", Content: prompt.String()}}, responseFormat: responseFormat,
		deferJournal: true,
	})
	if err != nil {
		return nil, nil, err
	}
	return []byte(resp.Content), attempt, nil
}

// llmCall is one LLM call of an attempt: the stage and chunk it computes,
// what it sends, and when its journal row is written.
type llmCall struct {
	stage store.JobStage
	chunk int32 // -1: the stage has no chunks
	// round is the repair round (0: the stage's first call); with the
	// stage, its key and the chunk it makes the provider key.
	round          int
	messages       []llm.Message
	responseFormat []byte
	// deferJournal: a successful call's journal row is returned instead of
	// written, to be written with the checkpoint that trusts it (flush);
	// any other outcome is journaled at once.
	deferJournal bool
}

// call makes one LLM call and journals it, whatever happened (c says
// when). An unknown outcome of an earlier attempt under the same provider
// key is looked up first, when the provider can.
func (r *run) call(ctx context.Context, c llmCall) (*llm.Response, *store.LLMAttempt, error) {
	stage, chunk := c.stage, c.chunk
	req := &llm.Request{
		Model:          r.profile.Model,
		Messages:       c.messages,
		Temperature:    r.p.Temperature,
		ResponseFormat: c.responseFormat,
		ProviderKey:    providerKey(r.job.ID, stage, r.progress.currentKey(), chunk, c.round),
	}
	history, err := r.calls.history(ctx, req.ProviderKey)
	if err != nil {
		return nil, nil, err
	}
	ctx, end := r.w.cfg.Observer.LLMCallStarted(ctx, r.job, req.Model)
	var attempt store.LLMAttempt
	defer func() { end(&attempt) }()
	start := time.Now()
	// Asking the provider about a call it may have finished costs nothing,
	// so it comes before the budget; a new call does not. A lookup that
	// answered, or failed to ask, ends the call.
	resp, err := r.lookup(ctx, req.ProviderKey, history)
	lookedUp := resp != nil || err != nil
	if !lookedUp {
		if err := r.checkBudget(); err != nil {
			return nil, nil, err
		}
		start = time.Now()
		if batch := r.profile.ProviderBatch; batch != nil {
			resp, err = r.w.batcher.call(ctx, r.lease, req, r.attemptOf(req, stage, chunk), batch.WithDefaults(), history.batchTag)
		} else {
			var sent bool
			resp, start, sent, err = r.generatePaced(ctx, req, stage, chunk, history)
			if !sent {
				// Nothing reached the provider: there is nothing to
				// journal, and the wait is settled by decide.
				return nil, nil, err
			}
		}
	}
	latency := time.Since(start)
	if err == nil {
		failpoint.Inject(failpoint.AfterLLMResponse)
	}

	attempt = r.outcome(ctx, r.attemptOf(req, stage, chunk), latency, resp, err, history, lookedUp)
	if err == nil && c.deferJournal {
		return resp, &attempt, nil
	}
	// The journal outlives the lease: record even when the job's context is
	// gone. A provider batch's row steers the next attempt (which batch to
	// wait for), so it is fenced: an attempt taken over writes none.
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var fence *store.Lease
	if attempt.PriceClass == store.PriceClassBatch {
		fence = &r.lease
	}
	if jerr := r.w.cfg.Store.LLMAttemptRecord(jctx, &store.LLMAttemptRecordParams{Attempt: attempt, Fence: fence}); jerr != nil {
		if errors.Is(jerr, store.ErrLeaseLost) {
			r.log.Info("provider batch outcome not journaled: the job was taken over", "provider_key", req.ProviderKey, "outcome", attempt.Outcome)
			return nil, nil, jerr
		}
		r.log.Error("journal write failed", "error", jerr, "provider_key", req.ProviderKey)
		if err == nil {
			return nil, nil, jerr // unjournaled usage must not be checkpointed
		}
	}
	return resp, nil, err
}

// generatePaced sends req when the provider limit lets it (pace), and
// again after each 429, which is the provider's pacing and not the job's
// failure: the 429 is journaled, the limit pauses every process's calls
// for its Retry-After, and the call waits its turn again, the job's
// attempt untouched. It reports whether the last call was sent (false: the
// wait ended first, with a *pace.WaitError or the job's context) and when.
func (r *run) generatePaced(ctx context.Context, req *llm.Request, stage store.JobStage, chunk int32, history keyHistory) (*llm.Response, time.Time, bool, error) {
	call := pace.Call{
		Limit: r.w.cfg.Pipelines.LimitOf(r.job.ModelProfile), Messages: req.Messages, MaxTokens: req.MaxTokens,
		Tenant: r.job.Tenant, Group: r.job.RunID, Batch: r.job.Priority == store.JobPriorityBatch,
		Deadline: r.job.BudgetStartedAt.Add(r.p.Retry.Deadline),
	}
	for {
		ticket, err := r.w.pacer.Wait(ctx, call)
		if err != nil {
			return nil, time.Time{}, false, err
		}
		start := time.Now()
		resp, err := r.w.cfg.Provider.Generate(ctx, req)
		ticket.Done(resp, err)
		if class, ok := llm.ClassOf(err); !ok || class != llm.ClassRateLimited || ctx.Err() != nil {
			return resp, start, true, err
		}
		attempt := r.outcome(ctx, r.attemptOf(req, stage, chunk), time.Since(start), nil, err, history, false)
		if jerr := r.w.cfg.Store.LLMAttemptRecord(ctx, &store.LLMAttemptRecordParams{Attempt: attempt}); jerr != nil {
			return nil, time.Time{}, false, jerr
		}
	}
}

// attemptOf is the journal row of a call of req, its outcome to be set.
// outcome is the journal row of a call that ended with resp or err: its
// outcome, and what it billed (at the batch price when it went through a
// provider batch; a replayed answer is billed when no earlier attempt
// counted it).
func (r *run) outcome(ctx context.Context, attempt store.LLMAttempt, latency time.Duration, resp *llm.Response, err error, history keyHistory, lookedUp bool) store.LLMAttempt {
	attempt.LatencyMillis = latency.Milliseconds()
	attempt.PriceClass = store.PriceClassOnline
	if r.profile.ProviderBatch != nil && !lookedUp {
		attempt.PriceClass = store.PriceClassBatch
	}
	switch class, classified := llm.ClassOf(err); {
	case err == nil:
		attempt.Outcome = store.LLMOutcomeSucceeded
		// The provider bills a key once. A replayed answer is counted here
		// when no earlier attempt counted it: the call that billed it ended
		// with an unknown outcome.
		attempt.Billed = !resp.Replayed || !history.counted
		attempt.ProviderRequestID = resp.ProviderRequestID
		if attempt.Billed {
			attempt.PromptTokens, attempt.CompletionTokens = resp.PromptTokens, resp.CompletionTokens
			attempt.CostMicros = r.profile.CostMicros(resp.PromptTokens, resp.CompletionTokens)
			if attempt.PriceClass == store.PriceClassBatch {
				attempt.CostMicros = r.profile.BatchCostMicros(resp.PromptTokens, resp.CompletionTokens)
			}
			r.calls.bill(resp.PromptTokens + resp.CompletionTokens)
		}
	case ctx.Err() != nil:
		attempt.Outcome, attempt.Error = store.LLMOutcomeCancelled, context.Cause(ctx).Error()
	case classified:
		attempt.Outcome, attempt.Error = store.LLMOutcome(class.String()), err.Error()
	default:
		attempt.Outcome, attempt.Error = store.LLMOutcomeUnavailable, err.Error()
	}
	return attempt
}

func (r *run) attemptOf(req *llm.Request, stage store.JobStage, chunk int32) store.LLMAttempt {
	return store.LLMAttempt{
		JobID: r.job.ID, Tenant: r.job.Tenant, JobAttempt: r.job.Attempt, Stage: stage, Chunk: chunk,
		ProviderKey: req.ProviderKey, Model: req.Model,
	}
}

// lookup asks the provider for the call it may have finished under key,
// when the last attempt's outcome under it was unknown and the provider
// can look calls up: the reconciler's question. It returns the call's
// answer, or the error of a lookup that could not ask; neither (nothing to
// ask, or no finished call under key) means the caller generates again
// under the same key.
func (r *run) lookup(ctx context.Context, key string, h keyHistory) (*llm.Response, error) {
	if !h.unknown || !r.w.cfg.Provider.CanLookup() {
		return nil, nil
	}
	resp, err := r.w.cfg.Provider.Lookup(ctx, key)
	switch {
	case err == nil:
		r.log.Info("unknown outcome reconciled by lookup", "provider_key", key)
		resp.Replayed = true // nothing new was billed by asking
		return resp, nil
	case errors.Is(err, llm.ErrNotFound), errors.Is(err, llm.ErrLookupUnsupported):
		return nil, nil
	default:
		return nil, err
	}
}
