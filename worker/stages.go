package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/oncejob/oncejob/store"
)

// stages runs every stage not yet checkpointed, then publishes. The
// deterministic stages (text_extracted, chunks_ready, the merge, and
// validated when the output needs no repair) are computed in memory and
// write no checkpoint: a later attempt computes them again from the
// document and the LLM checkpoints, for nothing. Every chunk's stage key is
// looked up in the decision cache in one read before the first LLM call.
// A stage's advance of the job's stage is carried in the next durable
// write: an LLM answer's (with its journal row and checkpoint), or the
// publish. See docs/architecture.md, "The batched engine".
func (r *run) stages(ctx context.Context) error {
	if err := r.progress.load(ctx, r.w.cfg.Store, r.job.ID); err != nil {
		return err
	}
	textSpec, text, err := r.textStage(ctx)
	if err != nil {
		return err
	}
	r.progress.textExtracted()
	chunksSpec, chunks, err := r.chunksStage(text)
	if err != nil {
		return err
	}
	chunkSpecs, mergeSpec := r.llmSpecs(chunks)
	if err := r.readDecisions(ctx, chunkSpecs); err != nil {
		return err
	}

	if _, err := r.stage(ctx, textSpec); err != nil {
		return err
	}
	if _, err := r.stage(ctx, chunksSpec); err != nil {
		return err
	}
	r.progress.dropAhead()
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
	validated, err := r.stage(ctx, r.validSpec(merged))
	if err != nil {
		return err
	}
	if r.p.RequireApproval && !r.job.Approved {
		return errAwaitApproval{output: validated}
	}
	return r.publish(ctx, validated)
}

// textStage is text_extracted: the document's text, computed in memory.
// A document that cannot be read as text fails the job (its own bad data,
// not an outage).
func (r *run) textStage(ctx context.Context) (stageSpec, []byte, error) {
	spec := stageSpec{
		stage: store.JobStageTextExtracted, chunk: -1, version: extractVersion, advance: true, deterministic: true,
		inputs: map[string]any{"document_sha256": r.job.DocumentSHA256, "media_type": r.job.DocumentMedia},
	}
	text, err := r.deterministic(spec, func() ([]byte, error) {
		data := r.progress.claimedDocument()
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
	return spec, text, err
}

// chunksStage is chunks_ready: the text cut by the pipeline's chunking.
func (r *run) chunksStage(text []byte) (stageSpec, []string, error) {
	spec := stageSpec{
		stage: store.JobStageChunksReady, chunk: -1, version: chunkVersion, advance: true, deterministic: true,
		inputs: map[string]any{"text_sha256": sha256Hex(text), "size": r.p.Chunking.Size, "overlap": r.p.Chunking.Overlap},
	}
	chunksJSON, err := r.deterministic(spec, func() ([]byte, error) {
		return json.Marshal(chunkText(string(text), r.p.Chunking.Size, r.p.Chunking.Overlap))
	})
	if err != nil {
		return spec, nil, err
	}
	var chunks []string
	if err := json.Unmarshal(chunksJSON, &chunks); err != nil {
		return spec, nil, fmt.Errorf("chunks checkpoint: %w", err)
	}
	return spec, chunks, nil
}

// llmSpecs are the LLM stage of each chunk and the merge of their answers
// (its compute set once the answers are in).
func (r *run) llmSpecs(chunks []string) ([]stageSpec, stageSpec) {
	responseFormat := r.p.ResponseFormatJSON()
	specs := make([]stageSpec, len(chunks))
	keys := make([]any, len(chunks))
	for i, chunk := range chunks {
		specs[i] = stageSpec{
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
		keys[i] = specs[i].key()
	}
	merge := stageSpec{
		stage: store.JobStageLLMDone, chunk: -1, version: mergeVersion, advance: true, deterministic: true,
		inputs: map[string]any{"chunk_keys": keys},
	}
	return specs, merge
}

// validSpec is the validated stage of merged: the output checked against
// the pipeline's schema, repaired by the model when it fails.
func (r *run) validSpec(merged []byte) stageSpec {
	schemaJSON := r.p.OutputSchemaJSON()
	spec := stageSpec{
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
		// Valid as it is: validating costs nothing and makes no call, so
		// the decision cache is not asked (it is for the repairs, which
		// cost LLM calls) and no checkpoint is written.
		r.ahead.know(spec.key())
		spec.deterministic = true
	}
	return spec
}

// deterministic returns a deterministic stage's output without writing
// anything: this job's checkpoint when its key matches (one an earlier
// version of the engine wrote), else computed in memory.
func (r *run) deterministic(s stageSpec, compute func() ([]byte, error)) ([]byte, error) {
	key := s.key()
	if out, ok := r.progress.checkpointed(s, key); ok {
		return out, nil
	}
	out, err := compute()
	if err != nil {
		return nil, err
	}
	r.progress.computedAhead(key, out)
	return out, nil
}

// readDecisions asks the decision cache, in one read, for every stage of
// specs this job has no checkpoint of.
func (r *run) readDecisions(ctx context.Context, specs []stageSpec) error {
	var keys []string
	for _, s := range specs {
		key := s.key()
		if _, ok := r.progress.checkpointed(s, key); ok {
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
	r.ahead.record(keys, found)
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
	// deterministic: a pure function of the document and the LLM
	// checkpoints, made without an LLM call. It is computed, never looked
	// up, and writes no checkpoint.
	deterministic bool
	// compute returns the stage's output and, for an LLM answer, the
	// attempt to journal with its checkpoint.
	compute func(context.Context) ([]byte, *store.LLMAttempt, error)
}

func (s stageSpec) key() string { return stageKey(s.stage, s.version, s.inputs) }

// stage returns a stage's output: from this job's checkpoint when its key
// matches, else computed when the stage is deterministic, else from the
// decision cache (any job of the tenant with the same stage key), else
// computed. A deterministic stage writes nothing; the others are
// checkpointed, fenced: an LLM answer at once, with its journal row and the
// checkpoints pending before it, in one write; any other (a chunk the
// decision cache served, a repaired output) with the next such write. A
// stage that advances the job's stage does so in the next write too.
func (r *run) stage(ctx context.Context, s stageSpec) (_ []byte, err error) {
	key := s.key()
	if out, ok := r.progress.checkpointed(s, key); ok {
		return out, nil
	}
	ctx, end := r.w.cfg.Observer.StageStarted(ctx, r.job, s.stage, s.chunk)
	source := "computed"
	defer func() { end(source, err) }()
	if s.deterministic {
		var out []byte
		if out, _, err = r.compute(ctx, s); err != nil {
			return nil, err
		}
		r.advance(s)
		return out, nil
	}
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
		r.progress.begin(key)
		if out, attempt, err = r.compute(ctx, s); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	r.buf.add(store.StageCheckpoint{
		Stage:       s.stage,
		Chunk:       s.chunk,
		StageKey:    key,
		CodeVersion: s.version,
		Output:      out,
		ReusedFrom:  reusedFrom,
		Message:     string(s.stage) + ": " + message,
	})
	r.advance(s)
	if attempt != nil {
		if err := r.buf.flush(ctx, attempt); err != nil {
			if !errors.Is(err, store.ErrLeaseLost) {
				r.log.Error("journal write failed", "error", err, "provider_key", attempt.ProviderKey)
			}
			// The settling flush must not checkpoint the output: the next
			// attempt asks the provider again.
			r.buf.dropLast()
			return nil, err
		}
	}
	return out, nil
}

// advance records that the job reached s's stage, when s advances it.
func (r *run) advance(s stageSpec) {
	if s.advance {
		r.buf.reach(s.stage)
	}
}

// compute runs s, or takes what deterministic computed of it already.
func (r *run) compute(ctx context.Context, s stageSpec) ([]byte, *store.LLMAttempt, error) {
	if out, ok := r.progress.aheadOf(s.key()); ok {
		return out, nil, nil
	}
	return s.compute(ctx)
}

// decision is the decision cache's answer for key: read ahead, or read now.
func (r *run) decision(ctx context.Context, key string) (*store.Checkpoint, error) {
	if cp, ok := r.ahead.lookup(key); ok {
		if cp == nil {
			return nil, store.ErrNotFound
		}
		return cp, nil
	}
	return r.w.cfg.Store.CheckpointGetByStageKey(ctx, &store.CheckpointGetByStageKeyParams{Tenant: r.job.Tenant, StageKey: key})
}
