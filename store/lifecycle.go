package store

import (
	"fmt"
	"slices"
)

// The lifecycle rules every store applies the same way (design §4). They live
// here, beside the types, so the stores cannot drift apart.

// workerTargets are the statuses a worker may move its running job to, each
// with whether the job is finished there.
var workerTargets = map[JobStatus]bool{
	JobStatusRetryWait:        false,
	JobStatusOutcomeUnknown:   false,
	JobStatusAwaitingApproval: false,
	JobStatusFailed:           true,
	JobStatusDeadLettered:     true,
	JobStatusCancelled:        true,
}

// WorkerTransition reports whether JobTransition may move a running job to
// to, and whether the job is finished there (finished_at is set).
func WorkerTransition(to JobStatus) (allowed, finished bool) {
	finished, allowed = workerTargets[to]
	return allowed, finished
}

// EventMessage is the message of the event JobTransition appends: an error
// shows as "code: message", so the event log alone tells why a job moved.
func (p *JobTransitionParams) EventMessage() string {
	if p.Error == nil {
		return p.Message
	}
	cause := p.Error.Code + ": " + p.Error.Message
	if p.Message == "" {
		return cause
	}
	return p.Message + " (" + cause + ")"
}

// OperatorEventMessage is the message of the event an operator transition
// appends: the action, the operator's message and, when set, the error as
// "code: message".
func OperatorEventMessage(action, message string, jobErr *JobError) string {
	if message != "" {
		action += ": " + message
	}
	if jobErr != nil {
		action += " (" + jobErr.Code + ": " + jobErr.Message + ")"
	}
	return action
}

// The statuses each operator transition starts from.
var (
	CancelFrom  = []JobStatus{JobStatusQueued, JobStatusRetryWait, JobStatusAwaitingApproval, JobStatusOutcomeUnknown, JobStatusRunning}
	ReplayFrom  = []JobStatus{JobStatusFailed, JobStatusDeadLettered}
	ResolveFrom = []JobStatus{JobStatusOutcomeUnknown}
	ApproveFrom = []JobStatus{JobStatusAwaitingApproval}
)

// stageOrder is the lifecycle order of stages.
var stageOrder = []JobStage{
	JobStageUploaded,
	JobStageTextExtracted,
	JobStageChunksReady,
	JobStageLLMDone,
	JobStageValidated,
	JobStagePublished,
}

// ReplayReset says what a replay from stage from undoes: the stages whose
// checkpoints it deletes (from and every later one) and the stage the job
// goes back to (the one before from). An empty from resets nothing; from
// published, or an unknown stage, is an error.
func ReplayReset(from JobStage) (reset []string, back string, err error) {
	if from == "" {
		return []string{}, "", nil
	}
	i := slices.Index(stageOrder, from)
	if i < 0 || from == JobStagePublished {
		return nil, "", fmt.Errorf("replay from stage %q: want a stage before published", from)
	}
	for _, stage := range stageOrder[i:] {
		reset = append(reset, string(stage))
	}
	return reset, string(stageOrder[max(i-1, 0)]), nil
}
