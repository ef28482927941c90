package server

import (
	"encoding/json"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/store"
)

var statusToProto = map[store.JobStatus]oncejobv1.JobStatus{
	store.JobStatusQueued:           oncejobv1.JobStatus_JOB_STATUS_QUEUED,
	store.JobStatusRunning:          oncejobv1.JobStatus_JOB_STATUS_RUNNING,
	store.JobStatusRetryWait:        oncejobv1.JobStatus_JOB_STATUS_RETRY_WAIT,
	store.JobStatusAwaitingApproval: oncejobv1.JobStatus_JOB_STATUS_AWAITING_APPROVAL,
	store.JobStatusOutcomeUnknown:   oncejobv1.JobStatus_JOB_STATUS_OUTCOME_UNKNOWN,
	store.JobStatusSucceeded:        oncejobv1.JobStatus_JOB_STATUS_SUCCEEDED,
	store.JobStatusFailed:           oncejobv1.JobStatus_JOB_STATUS_FAILED,
	store.JobStatusCancelled:        oncejobv1.JobStatus_JOB_STATUS_CANCELLED,
	store.JobStatusDeadLettered:     oncejobv1.JobStatus_JOB_STATUS_DEAD_LETTERED,
}

var statusFromProto = func() map[oncejobv1.JobStatus]store.JobStatus {
	m := make(map[oncejobv1.JobStatus]store.JobStatus, len(statusToProto))
	for k, v := range statusToProto {
		m[v] = k
	}
	return m
}()

var stageToProto = map[store.JobStage]oncejobv1.JobStage{
	store.JobStageUploaded:      oncejobv1.JobStage_JOB_STAGE_UPLOADED,
	store.JobStageTextExtracted: oncejobv1.JobStage_JOB_STAGE_TEXT_EXTRACTED,
	store.JobStageChunksReady:   oncejobv1.JobStage_JOB_STAGE_CHUNKS_READY,
	store.JobStageLLMDone:       oncejobv1.JobStage_JOB_STAGE_LLM_DONE,
	store.JobStageValidated:     oncejobv1.JobStage_JOB_STAGE_VALIDATED,
	store.JobStagePublished:     oncejobv1.JobStage_JOB_STAGE_PUBLISHED,
}

var outcomeToProto = map[store.SubmitOutcome]oncejobv1.SubmitOutcome{
	store.OutcomeCreated:      oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED,
	store.OutcomeExisting:     oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING,
	store.OutcomeDeduplicated: oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_DEDUPLICATED,
}

func jobToProto(j *store.Job) *oncejobv1.Job {
	pj := &oncejobv1.Job{
		Id:                j.ID,
		IdempotencyKey:    j.IdempotencyKey,
		DedupKey:          j.DedupKey,
		Pipeline:          j.Pipeline,
		PipelineVersion:   j.PipelineVersion,
		PromptVersion:     j.PromptVersion,
		ModelProfile:      j.ModelProfile,
		Status:            statusToProto[j.Status],
		Stage:             stageToProto[j.Stage],
		Attempt:           j.Attempt,
		AttemptsSpent:     j.BudgetAttempts,
		Output:            jsonToStruct(j.Output),
		DeduplicatedFrom:  j.DeduplicatedFrom,
		DocumentSha256:    j.DocumentSHA256,
		DocumentMediaType: j.DocumentMedia,
		DocumentName:      j.DocumentName,
		DocumentSizeBytes: j.DocumentSize,
		Params:            jsonToStruct(j.Params),
		Labels:            j.Labels,
		Usage: &oncejobv1.JobUsage{
			PromptTokens:     j.Usage.PromptTokens,
			CompletionTokens: j.Usage.CompletionTokens,
			CostMicros:       j.Usage.CostMicros,
			LlmCalls:         j.Usage.LLMCalls,
		},
		CreateTime: timestamppb.New(j.CreatedAt),
		UpdateTime: timestamppb.New(j.UpdatedAt),
	}
	if j.Error != nil {
		pj.Error = &oncejobv1.JobError{Code: j.Error.Code, Message: j.Error.Message, Retryable: j.Error.Retryable}
	}
	if j.FinishedAt != nil {
		pj.FinishTime = timestamppb.New(*j.FinishedAt)
	}
	pj.RunId, pj.Priority = j.RunID, priorityToProto[j.Priority]
	if j.RunAfter != nil && (j.Status == store.JobStatusRetryWait || j.Status == store.JobStatusOutcomeUnknown) {
		pj.NextAttemptTime = timestamppb.New(*j.RunAfter)
	}
	return pj
}

var priorityToProto = map[store.JobPriority]oncejobv1.Priority{
	store.JobPriorityInteractive: oncejobv1.Priority_PRIORITY_INTERACTIVE,
	store.JobPriorityBatch:       oncejobv1.Priority_PRIORITY_BATCH,
}

// jsonToStruct decodes a stored JSON object; nil or invalid gives nil, which
// only a store bug could produce.
func jsonToStruct(b []byte) *structpb.Struct {
	if len(b) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil
	}
	return s
}
