package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"text/template"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/oncejob/oncejob/failpoint"
	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/store"
)

// Causes of a job context's cancellation.
var (
	errLeaseLost       = errors.New("lease lost")
	errCancelRequested = errors.New("cancel requested")
)

// permanentError fails a job: no retry can help.
type permanentError struct {
	code string
	err  error
}

func (e *permanentError) Error() string { return e.code + ": " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(code string, format string, args ...any) error {
	return &permanentError{code: code, err: fmt.Errorf(format, args...)}
}

// errAlreadyComputed: another job of the tenant published this computation
// while this one ran; publishing now reuses its result.
var errAlreadyComputed = errors.New("computation already succeeded in another job")

// run is one claimed attempt of one job.
type run struct {
	w        *Worker
	job      *store.Job
	p        *pipeline.Pipeline
	profile  pipeline.ModelProfile
	lease    store.Lease
	log      *slog.Logger
	cps      map[cpKey]*store.Checkpoint
	tokens   int64  // billed in this attempt
	lastKey  string // the provider key of the last call made
	stageKey string // the key of the stage being computed

	// document is the job's document as the claim read it; nil: read it.
	document []byte
	// The job's checkpoints as the claim read them, when checkpointsRead
	// (a first attempt has none).
	claimedCheckpoints []*store.Checkpoint
	checkpointsRead    bool
	// decisions holds the decision cache's answers read ahead (one read
	// for every stage key known before the first LLM call); a key in
	// known but not in decisions has no cached result.
	decisions map[string]*store.Checkpoint
	known     map[string]bool
	// pending are checkpoints computed but not written yet: they go with
	// the attempt's next durable write (an LLM answer's, the publish, or
	// the settling transition), fenced like it.
	pending []store.StageCheckpoint
	// computed are the deterministic stages computed ahead, by key.
	computed []computedStage
	// dedupChecked: the read-ahead just checked the dedup key (computedBy
	// its answer), so the next LLM call need not read it again.
	dedupChecked bool
	computedBy   string

	// How the attempt ended, for the Observer: the status it wrote, and
	// the budget a dead letter spent.
	settled store.JobStatus
	budget  string

	// What earlier attempts journaled per provider key; loaded on a
	// job's second attempt or later.
	journal map[string]keyHistory
}

type keyHistory struct {
	counted bool // a billed call under the key is in the job's usage
	unknown bool // the last attempt under the key had an unknown outcome
	// batchTag names the provider batch the last attempt sent the call in.
	batchTag string
}

type cpKey struct {
	stage store.JobStage
	chunk int32
}

func (w *Worker) work(ctx context.Context, claimed *store.JobWork) {
	job := claimed.Job
	r := &run{
		w:        w,
		job:      job,
		lease:    store.Lease{JobID: job.ID, Owner: w.cfg.Owner, Attempt: job.Attempt},
		log:      w.log.With("job_id", job.ID, "attempt", job.Attempt),
		document: claimed.Document,

		claimedCheckpoints: claimed.Checkpoints,
		checkpointsRead:    claimed.CheckpointsRead,
		decisions:          map[string]*store.Checkpoint{},
		known:              map[string]bool{},
	}
	ctx, end := w.cfg.Observer.JobStarted(ctx, job)
	defer func() { end(r.settled, r.budget) }()
	jobCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w.heartbeater.add(r.lease, cancel)
	defer w.heartbeater.remove(r.lease)

	err := r.prepare()
	if err == nil {
		err = r.stages(jobCtx)
	}
	r.settle(ctx, jobCtx, err)
}

// prepare checks what must hold before any stage runs.
func (r *run) prepare() error {
	if r.job.CancelRequested {
		return errCancelRequested
	}
	p, ok := r.w.cfg.Pipelines.Get(r.job.Pipeline)
	if !ok {
		return permanent("PIPELINE_UNKNOWN", "pipeline %q is not configured on this worker", r.job.Pipeline)
	}
	r.p = p
	profile, ok := r.w.cfg.Pipelines.Profile(r.job.ModelProfile)
	if !ok {
		return permanent("MODEL_PROFILE_UNKNOWN", "model profile %q is not configured on this worker", r.job.ModelProfile)
	}
	r.profile = profile
	if profile.ProviderBatch != nil && r.w.batcher == nil {
		return permanent("PROVIDER_BATCH_UNSUPPORTED", "model profile %q sends its calls through a provider batch: %v", r.job.ModelProfile, llm.ErrBatchUnsupported)
	}
	if p.Version != r.job.PipelineVersion || p.Prompt.Version != r.job.PromptVersion {
		// A rolling deploy: this worker runs another version of the pipeline.
		// Running the job here would publish another computation under the
		// job's dedup key; a worker with its version may take it.
		return &retryableError{code: "PIPELINE_VERSION_MISMATCH", err: fmt.Errorf(
			"the job needs %s version %d prompt %s; this worker has version %d prompt %s",
			p.Name, r.job.PipelineVersion, r.job.PromptVersion, p.Version, p.Prompt.Version)}
	}
	// Claims that only finish what a person or the reconciler released (an
	// approved plan, an unknown outcome to look up) cost no new work, so the
	// attempts budget does not stop them; it stops crash loops.
	released := r.job.Approved || (r.job.Error != nil && r.job.Error.Code == unknownOutcomeCode)
	if !released && r.job.BudgetAttempts > int32(p.Retry.MaxAttempts) {
		return &budgetError{"attempts", fmt.Sprintf("attempts spent: %d of %d (workers died or lost their leases)", r.job.BudgetAttempts-1, p.Retry.MaxAttempts)}
	}
	return nil
}

// retryableError is a failure outside the provider that a later attempt,
// maybe on another worker, may not have.
type retryableError struct {
	code string
	err  error
}

func (e *retryableError) Error() string { return e.code + ": " + e.err.Error() }

// budgetError dead-letters a job. kind names the budget spent: attempts,
// deadline or tokens.
type budgetError struct{ kind, reason string }

func (e *budgetError) Error() string { return "budget spent: " + e.reason }

// checkBudget is called before anything that costs.
func (r *run) checkBudget() error {
	policy := r.p.Retry
	if d := time.Since(r.job.BudgetStartedAt); d > policy.Deadline {
		return &budgetError{"deadline", fmt.Sprintf("deadline of %s passed", policy.Deadline)}
	}
	if used := r.job.BudgetTokens + r.tokens; used >= policy.MaxCostTokens {
		return &budgetError{"tokens", fmt.Sprintf("%d of %d tokens used", used, policy.MaxCostTokens)}
	}
	return nil
}

// stages runs every stage not yet checkpointed, then publishes. The
// deterministic stages (text_extracted, chunks_ready, the merge) are
// computed in memory, and every stage key known before the first LLM call
// is looked up in the decision cache in one read; their checkpoints go
// with the next durable write: an LLM answer's (with its journal row), or
// the publish. See docs/architecture.md, "The batched engine".
func (r *run) stages(ctx context.Context) error {
	r.cps = map[cpKey]*store.Checkpoint{}
	cps := r.claimedCheckpoints
	if !r.checkpointsRead { // the claim did not read them
		var err error
		if cps, err = r.w.cfg.Store.CheckpointList(ctx, &store.CheckpointListParams{JobID: r.job.ID}); err != nil {
			return err
		}
	}
	for _, cp := range cps {
		r.cps[cpKey{cp.Stage, cp.Chunk}] = cp
	}
	r.claimedCheckpoints = nil

	textSpec := stageSpec{
		stage: store.JobStageTextExtracted, chunk: -1, version: extractVersion, advance: true,
		inputs: map[string]any{"document_sha256": r.job.DocumentSHA256, "media_type": r.job.DocumentMedia},
	}
	text, err := r.deterministic(textSpec, func() ([]byte, error) {
		data := r.document
		if data == nil {
			var err error
			if data, err = r.w.cfg.Store.DocumentGet(ctx, &store.DocumentGetParams{Tenant: r.job.Tenant, SHA256: r.job.DocumentSHA256}); err != nil {
				return nil, err
			}
		}
		t, err := extractChecked(data, r.job.DocumentMedia)
		switch {
		case errors.Is(err, errNULInText):
			return nil, permanent("INVALID_DOCUMENT", "%w", err)
		case err != nil:
			return nil, permanent("UNSUPPORTED_MEDIA_TYPE", "%w", err)
		}
		return []byte(t), nil
	})
	if err != nil {
		return err
	}
	r.document = nil // not needed any more: an in-flight job keeps little

	chunksSpec := stageSpec{
		stage: store.JobStageChunksReady, chunk: -1, version: chunkVersion, advance: true,
		inputs: map[string]any{"text_sha256": sha256Hex(text), "size": r.p.Chunking.Size, "overlap": r.p.Chunking.Overlap},
	}
	chunksJSON, err := r.deterministic(chunksSpec, func() ([]byte, error) {
		return json.Marshal(chunkText(string(text), r.p.Chunking.Size, r.p.Chunking.Overlap))
	})
	if err != nil {
		return err
	}
	var chunks []string
	if err := json.Unmarshal(chunksJSON, &chunks); err != nil {
		return fmt.Errorf("chunks checkpoint: %w", err)
	}

	responseFormat := r.p.ResponseFormatJSON()
	chunkSpecs := make([]stageSpec, len(chunks))
	chunkKeys := make([]any, len(chunks))
	for i, chunk := range chunks {
		chunkSpecs[i] = stageSpec{
			stage: store.JobStageLLMDone, chunk: int32(i), version: llmVersion,
			inputs: map[string]any{
				"model":           r.profile.Model,
				"prompt_version":  r.p.Prompt.Version,
				"temperature":     r.p.Temperature,
				"response_format": string(responseFormat),
				"chunk_sha256":    sha256Hex([]byte(chunk)),
				"params":          string(r.job.Params),
			},
			compute: func(ctx context.Context) ([]byte, *store.LLMAttempt, error) {
				return r.generate(ctx, int32(i), len(chunks), chunk, responseFormat)
			},
		}
		chunkKeys[i] = chunkSpecs[i].key()
	}
	mergeSpec := stageSpec{
		stage: store.JobStageLLMDone, chunk: -1, version: mergeVersion, advance: true,
		inputs: map[string]any{"chunk_keys": chunkKeys},
	}
	if err := r.readDecisions(ctx, append([]stageSpec{textSpec, chunksSpec, mergeSpec}, chunkSpecs...)); err != nil {
		return err
	}

	if _, err := r.stage(ctx, textSpec); err != nil {
		return err
	}
	if _, err := r.stage(ctx, chunksSpec); err != nil {
		return err
	}
	r.computed = nil // taken: the pending checkpoints hold them
	outputs := make([][]byte, len(chunks))
	for i, spec := range chunkSpecs {
		if outputs[i], err = r.stage(ctx, spec); err != nil {
			return err
		}
	}

	mergeSpec.compute = func(context.Context) ([]byte, *store.LLMAttempt, error) {
		m, err := mergeOutputs(outputs)
		if err != nil {
			// Not JSON: validation rejects it and asks for a repair.
			return bytes.Join(outputs, []byte("\n")), nil, nil
		}
		return m, nil, nil
	}
	merged, err := r.stage(ctx, mergeSpec)
	if err != nil {
		return err
	}

	schemaJSON := r.p.OutputSchemaJSON()
	validSpec := stageSpec{
		stage: store.JobStageValidated, chunk: -1, version: validateVersion, advance: true,
		inputs: map[string]any{
			"validator_sha256": sha256Hex(schemaJSON),
			"repair_attempts":  *r.p.RepairAttempts,
			"model":            r.profile.Model,
			"output_sha256":    sha256Hex(merged),
		},
		compute: func(ctx context.Context) ([]byte, *store.LLMAttempt, error) {
			out, err := r.validate(ctx, schemaJSON, merged)
			return out, nil, err
		},
	}
	if schema, err := r.w.schema(schemaJSON); err == nil && validateJSON(schema, merged) == nil {
		// Valid as it is: validating costs nothing, so the decision cache
		// is not asked (it is for the repairs, which cost LLM calls).
		r.known[validSpec.key()] = true
	}
	validated, err := r.stage(ctx, validSpec)
	if err != nil {
		return err
	}
	if r.p.RequireApproval && !r.job.Approved {
		return errAwaitApproval{output: validated}
	}
	return r.publish(ctx, validated)
}

// deterministic returns a deterministic stage's output without writing
// anything: this job's checkpoint when its key matches, else computed in
// memory. stage() then decides what is checkpointed (the decision cache's
// answer, when it has one, names the job it came from).
func (r *run) deterministic(s stageSpec, compute func() ([]byte, error)) ([]byte, error) {
	if cp, ok := r.cps[cpKey{s.stage, s.chunk}]; ok && cp.StageKey == s.key() {
		return cp.Output, nil
	}
	out, err := compute()
	if err != nil {
		return nil, err
	}
	r.computed = append(r.computed, computedStage{key: s.key(), output: out})
	return out, nil
}

// readDecisions asks the decision cache, in one read, for every stage of
// specs this job has no checkpoint of.
func (r *run) readDecisions(ctx context.Context, specs []stageSpec) error {
	var keys []string
	for _, s := range specs {
		key := s.key()
		if cp, ok := r.cps[cpKey{s.stage, s.chunk}]; ok && cp.StageKey == key {
			continue
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil
	}
	found, err := r.w.cfg.Store.CheckpointGetByStageKeys(ctx, &store.CheckpointGetByStageKeysParams{
		Tenant: r.job.Tenant, StageKeys: keys, DedupKey: r.job.DedupKey,
	})
	if err != nil {
		return err
	}
	// The dedup re-check of the first LLM call is this read: nothing but
	// work in memory comes between.
	r.dedupChecked, r.computedBy = true, found.ComputedBy
	for _, key := range keys {
		r.known[key] = true
		if cp, ok := found.Checkpoints[key]; ok {
			r.decisions[key] = cp
		}
	}
	return nil
}

// errAwaitApproval stops a job whose pipeline asks for review before its
// effect: it waits in AWAITING_APPROVAL with its planned output visible.
type errAwaitApproval struct{ output []byte }

func (errAwaitApproval) Error() string { return "awaiting approval" }

type stageSpec struct {
	stage   store.JobStage
	chunk   int32
	version string
	inputs  map[string]any
	advance bool
	// compute returns the stage's output and, for an LLM answer, the
	// attempt to journal with its checkpoint.
	compute func(context.Context) ([]byte, *store.LLMAttempt, error)
}

func (s stageSpec) key() string { return stageKey(s.stage, s.version, s.inputs) }

// stage returns a stage's output: from this job's checkpoint when its key
// matches, else from the decision cache (any job of the tenant with the same
// stage key), else computed. The last two are checkpointed, fenced: an LLM
// answer at once, with its journal row and the checkpoints pending before
// it, in one write; any other stage with the next such write.
func (r *run) stage(ctx context.Context, s stageSpec) (_ []byte, err error) {
	key := s.key()
	if cp, ok := r.cps[cpKey{s.stage, s.chunk}]; ok && cp.StageKey == key {
		return cp.Output, nil
	}
	ctx, end := r.w.cfg.Observer.StageStarted(ctx, r.job, s.stage, s.chunk)
	source := "computed"
	defer func() { end(source, err) }()
	var (
		out                 []byte
		message, reusedFrom = "computed", ""
		attempt             *store.LLMAttempt
	)
	cached, err := r.decision(ctx, key)
	switch {
	case err == nil:
		source = "cache"
		out, message, reusedFrom = cached.Output, "reused from job "+cached.JobID, cached.JobID
	case errors.Is(err, store.ErrNotFound):
		r.stageKey = key
		if out, attempt, err = r.compute(ctx, s); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	r.pending = append(r.pending, store.StageCheckpoint{
		Stage:        s.stage,
		Chunk:        s.chunk,
		StageKey:     key,
		CodeVersion:  s.version,
		Output:       out,
		ReusedFrom:   reusedFrom,
		AdvanceStage: s.advance,
		Message:      string(s.stage) + ": " + message,
	})
	if attempt != nil {
		if err := r.flush(ctx, attempt); err != nil {
			// The output rests on a call the journal does not hold: the
			// settling flush must not checkpoint it (its usage would never
			// be counted). The next attempt asks the provider again.
			r.pending = r.pending[:len(r.pending)-1]
			return nil, err
		}
	}
	return out, nil
}

// compute runs s, or takes what deterministic computed of it already.
func (r *run) compute(ctx context.Context, s stageSpec) ([]byte, *store.LLMAttempt, error) {
	key := s.key()
	for _, c := range r.computed {
		if c.key == key {
			return c.output, nil, nil
		}
	}
	return s.compute(ctx)
}

// computedStage is a deterministic stage's output computed ahead.
type computedStage struct {
	key    string
	output []byte
}

// decision is the decision cache's answer for key: read ahead, or read now.
func (r *run) decision(ctx context.Context, key string) (*store.Checkpoint, error) {
	if cp, ok := r.decisions[key]; ok {
		return cp, nil
	}
	if r.known[key] {
		return nil, store.ErrNotFound
	}
	return r.w.cfg.Store.CheckpointGetByStageKey(ctx, &store.CheckpointGetByStageKeyParams{Tenant: r.job.Tenant, StageKey: key})
}

// flush writes the pending checkpoints, fenced, and journals attempt with
// them in the same write when set. The journal outlives the lease: it is
// written even when the job's context is gone or its lease lost.
func (r *run) flush(ctx context.Context, attempt *store.LLMAttempt) error {
	if len(r.pending) == 0 && attempt == nil {
		return nil
	}
	failpoint.Inject(failpoint.BeforeCheckpointWrite)
	// Bounded by the lease, not less: thousands of calls that return
	// together queue their writes for the pool's connections, and a write
	// given up sends its job to wait for its lease to expire.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(10*time.Second, r.w.cfg.LeaseDuration))
	defer cancel()
	err := r.w.cfg.Store.CheckpointWriteMany(wctx, &store.CheckpointWriteManyParams{
		Lease: r.lease, Checkpoints: r.pending, Attempt: attempt,
	})
	if err != nil {
		if attempt != nil && !errors.Is(err, store.ErrLeaseLost) {
			r.log.Error("journal write failed", "error", err, "provider_key", attempt.ProviderKey)
		}
		return err // unjournaled usage is not checkpointed: neither was written
	}
	r.pending = nil
	failpoint.Inject(failpoint.AfterCheckpointWrite)
	return nil
}

type promptData struct {
	Text   string
	Chunk  int // 1-based
	Chunks int
	Params map[string]any
}

// generate makes one chunk's LLM call, after checking again that no other
// job has computed the result meanwhile.
func (r *run) generate(ctx context.Context, chunk int32, chunks int, text string, responseFormat []byte) ([]byte, *store.LLMAttempt, error) {
	if r.dedupChecked { // by the decision cache's read-ahead
		r.dedupChecked = false
		if r.computedBy != "" && r.computedBy != r.job.ID {
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
	resp, attempt, err := r.call(ctx, store.JobStageLLMDone, chunk, 0, []llm.Message{{Role: "user", Content: prompt.String()}}, responseFormat, true)
	if err != nil {
		return nil, nil, err
	}
	return []byte(resp.Content), attempt, nil
}

// call makes one LLM call and journals it, whatever happened. With
// deferJournal, a successful call's attempt is returned instead, to be
// journaled in the write of the checkpoint that trusts it (flush); any
// other outcome is journaled here.
func (r *run) call(ctx context.Context, stage store.JobStage, chunk int32, round int, messages []llm.Message, responseFormat []byte, deferJournal bool) (*llm.Response, *store.LLMAttempt, error) {
	req := &llm.Request{
		Model:          r.profile.Model,
		Messages:       messages,
		Temperature:    r.p.Temperature,
		ResponseFormat: responseFormat,
		ProviderKey:    providerKey(r.job.ID, stage, r.stageKey, chunk, round),
	}
	r.lastKey = req.ProviderKey
	history, err := r.history(ctx, req.ProviderKey)
	if err != nil {
		return nil, nil, err
	}
	ctx, end := r.w.cfg.Observer.LLMCallStarted(ctx, r.job, req.Model)
	var attempt store.LLMAttempt
	defer func() { end(&attempt) }()
	start := time.Now()
	// Asking the provider about a call it may have finished costs nothing,
	// so it comes before the budget; a new call does not.
	resp, err, lookedUp := r.lookup(ctx, req.ProviderKey, history)
	if !lookedUp {
		if err := r.checkBudget(); err != nil {
			return nil, nil, err
		}
		start = time.Now()
		if batch := r.profile.ProviderBatch; batch != nil {
			resp, err = r.w.batcher.call(ctx, r.lease, req, r.attemptOf(req, stage, chunk), batch.WithDefaults(), history.batchTag)
		} else {
			resp, err = r.w.cfg.Provider.Generate(ctx, req)
		}
	}
	latency := time.Since(start)
	if err == nil {
		failpoint.Inject(failpoint.AfterLLMResponse)
	}

	attempt = store.LLMAttempt{
		JobID:         r.job.ID,
		Tenant:        r.job.Tenant,
		JobAttempt:    r.job.Attempt,
		Stage:         stage,
		Chunk:         chunk,
		ProviderKey:   req.ProviderKey,
		Model:         req.Model,
		LatencyMillis: latency.Milliseconds(),
		PriceClass:    store.PriceClassOnline,
	}
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
			r.tokens += resp.PromptTokens + resp.CompletionTokens
		}
	case ctx.Err() != nil:
		attempt.Outcome, attempt.Error = store.LLMOutcomeCancelled, context.Cause(ctx).Error()
	case classified:
		attempt.Outcome, attempt.Error = store.LLMOutcome(class.String()), err.Error()
	default:
		attempt.Outcome, attempt.Error = store.LLMOutcomeUnavailable, err.Error()
	}
	if err == nil && deferJournal {
		return resp, &attempt, nil
	}
	// The journal outlives the lease: record even when the job's context is
	// gone.
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if jerr := r.w.cfg.Store.LLMAttemptRecord(jctx, &store.LLMAttemptRecordParams{Attempt: attempt}); jerr != nil {
		r.log.Error("journal write failed", "error", jerr, "provider_key", req.ProviderKey)
		if err == nil {
			return nil, nil, jerr // unjournaled usage must not be checkpointed
		}
	}
	return resp, nil, err
}

// attemptOf is the journal row of a call of req, its outcome to be set.
func (r *run) attemptOf(req *llm.Request, stage store.JobStage, chunk int32) store.LLMAttempt {
	return store.LLMAttempt{
		JobID: r.job.ID, Tenant: r.job.Tenant, JobAttempt: r.job.Attempt, Stage: stage, Chunk: chunk,
		ProviderKey: req.ProviderKey, Model: req.Model,
	}
}

// history returns what earlier attempts of the job journaled under key.
func (r *run) history(ctx context.Context, key string) (keyHistory, error) {
	if r.job.Attempt <= 1 {
		return keyHistory{}, nil
	}
	if r.journal == nil {
		attempts, err := r.w.cfg.Store.LLMAttemptList(ctx, &store.LLMAttemptListParams{JobID: r.job.ID})
		if err != nil {
			return keyHistory{}, err
		}
		r.journal = map[string]keyHistory{}
		for _, a := range attempts {
			h := r.journal[a.ProviderKey]
			h.counted = h.counted || a.Billed
			if a.Outcome != store.LLMOutcomeCancelled {
				// A call left by a stopped attempt stays in its batch.
				h.batchTag = ""
			}
			if tag, ok := strings.CutPrefix(a.Error, intentPrefix); ok && a.Outcome == store.LLMOutcomeOutcomeUnknown {
				// Sent in a batch: its answer comes with the batch, never
				// by an online lookup.
				h.batchTag, h.unknown = tag, false
				r.journal[a.ProviderKey] = h
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
			r.journal[a.ProviderKey] = h
		}
	}
	return r.journal[key], nil
}

// lookup asks the provider for the call it may have finished under key when
// the last attempt's outcome was unknown: the reconciler's question. It
// reports whether it answered; if not, the caller generates again under the
// same key.
func (r *run) lookup(ctx context.Context, key string, h keyHistory) (*llm.Response, error, bool) {
	if !h.unknown {
		return nil, nil, false
	}
	resp, err := r.w.cfg.Provider.Lookup(ctx, key)
	switch {
	case err == nil:
		r.log.Info("unknown outcome reconciled by lookup", "provider_key", key)
		resp.Replayed = true // nothing new was billed by asking
		return resp, nil, true
	case errors.Is(err, llm.ErrNotFound), errors.Is(err, llm.ErrLookupUnsupported):
		return nil, nil, false
	default:
		return nil, err, true
	}
}

// validate checks the output against the pipeline's schema, asking the model
// for a repair a bounded number of times.
func (r *run) validate(ctx context.Context, schemaJSON, output []byte) ([]byte, error) {
	schema, err := r.w.schema(schemaJSON)
	if err != nil {
		return nil, permanent("OUTPUT_SCHEMA_INVALID", "%w", err)
	}
	for round := 0; ; round++ {
		verr := validateJSON(schema, output)
		if verr == nil {
			return output, nil
		}
		if round >= *r.p.RepairAttempts {
			return nil, permanent("INVALID_OUTPUT", "output does not satisfy the pipeline's schema after %d repair attempts: %v", round, verr)
		}
		prompt := fmt.Sprintf("Your previous answer does not satisfy the required JSON Schema.\n\nErrors:\n%v\n\nSchema:\n%s\n\nPrevious answer:\n%s\n\nAnswer again with only the corrected JSON object.", verr, schemaJSON, output)
		resp, _, err := r.call(ctx, store.JobStageValidated, -1, round+1, []llm.Message{{Role: "user", Content: prompt}}, r.p.ResponseFormatJSON(), false)
		if err != nil {
			return nil, err
		}
		output = []byte(resp.Content)
	}
}

func validateJSON(schema *jsonschema.Schema, output []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(output))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return errors.New("not a JSON object")
	}
	return schema.Validate(v)
}

func (w *Worker) schema(schemaJSON []byte) (*jsonschema.Schema, error) {
	key := sha256Hex(schemaJSON)
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.schemas[key]; ok {
		return s, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("output_schema.json", doc); err != nil {
		return nil, err
	}
	s, err := c.Compile("output_schema.json")
	if err != nil {
		return nil, err
	}
	w.schemas[key] = s
	return s, nil
}

func (w *Worker) template(p *pipeline.Pipeline) (*template.Template, error) {
	key := fmt.Sprintf("%s/%d/%s", p.Name, p.Version, p.Prompt.Version)
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.templates[key]; ok {
		return t, nil
	}
	t, err := template.New(key).Option("missingkey=error").Parse(p.Prompt.Template)
	if err != nil {
		return nil, err
	}
	w.templates[key] = t
	return t, nil
}
