package server

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/store"
)

// addDetail fills the FULL view's checkpoints and attempt journal of pj,
// a job the caller's tenant owns. The store's lists are by job id alone, so
// the job was first read scoped by tenant.
func (s *jobService) addDetail(ctx context.Context, pj *oncejobv1.Job) error {
	ds := s.cfg.Store
	cps, err := ds.CheckpointList(ctx, &store.CheckpointListParams{JobID: pj.GetId()})
	if err != nil {
		return s.storeError(ctx, err, "job "+pj.GetId())
	}
	attempts, err := ds.LLMAttemptList(ctx, &store.LLMAttemptListParams{JobID: pj.GetId()})
	if err != nil {
		return s.storeError(ctx, err, "job "+pj.GetId())
	}
	pj.Checkpoints = make([]*oncejobv1.StageCheckpoint, len(cps))
	for i, cp := range cps {
		pj.Checkpoints[i] = &oncejobv1.StageCheckpoint{
			Stage:           stageToProto[cp.Stage],
			Chunk:           cp.Chunk,
			StageKey:        cp.StageKey,
			CodeVersion:     cp.CodeVersion,
			Attempt:         cp.Attempt,
			ReusedFromJobId: cp.ReusedFrom,
			OutputSizeBytes: int64(len(cp.Output)),
			CreateTime:      timestamppb.New(cp.CreatedAt),
		}
	}
	pj.LlmAttempts = make([]*oncejobv1.LlmAttempt, len(attempts))
	for i, a := range attempts {
		pj.LlmAttempts[i] = &oncejobv1.LlmAttempt{
			JobAttempt:        a.JobAttempt,
			Stage:             stageToProto[a.Stage],
			Chunk:             a.Chunk,
			ProviderKey:       a.ProviderKey,
			Model:             a.Model,
			Outcome:           llmOutcomeToProto[a.Outcome],
			Billed:            a.Billed,
			PromptTokens:      a.PromptTokens,
			CompletionTokens:  a.CompletionTokens,
			CostMicros:        a.CostMicros,
			LatencyMs:         a.LatencyMillis,
			ProviderRequestId: a.ProviderRequestID,
			Error:             a.Error,
			CreateTime:        timestamppb.New(a.CreatedAt),
		}
	}
	return nil
}

var llmOutcomeToProto = map[store.LLMOutcome]oncejobv1.LlmOutcome{
	store.LLMOutcomeSucceeded:      oncejobv1.LlmOutcome_LLM_OUTCOME_SUCCEEDED,
	store.LLMOutcomeRateLimited:    oncejobv1.LlmOutcome_LLM_OUTCOME_RATE_LIMITED,
	store.LLMOutcomeUnavailable:    oncejobv1.LlmOutcome_LLM_OUTCOME_UNAVAILABLE,
	store.LLMOutcomeInvalidRequest: oncejobv1.LlmOutcome_LLM_OUTCOME_INVALID_REQUEST,
	store.LLMOutcomeOutcomeUnknown: oncejobv1.LlmOutcome_LLM_OUTCOME_OUTCOME_UNKNOWN,
	store.LLMOutcomeInvalidOutput:  oncejobv1.LlmOutcome_LLM_OUTCOME_INVALID_OUTPUT,
	store.LLMOutcomeCancelled:      oncejobv1.LlmOutcome_LLM_OUTCOME_CANCELLED,
}
