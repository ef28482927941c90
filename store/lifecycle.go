package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The lifecycle rules every store applies the same way (the status table in
// docs/architecture.md, "Job lifecycle"). They live here, beside the types,
// as small pure functions, so each store keeps only its SQL, its
// transaction shape and its row mapping, and the stores cannot drift apart.

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

// JobTransitionWrite is what a store writes for one JobTransition: the
// params checked and reduced to the columns they set.
type JobTransitionWrite struct {
	To JobStatus
	// Finished: finished_at becomes now.
	Finished bool
	// Parks: To leaves the job waiting (retry_wait, outcome_unknown,
	// awaiting_approval), so a cancel requested while it ran wins: the job
	// is cancelled (and finished) instead, with CancelledMessage.
	Parks bool
	// RunAfter is set only where To reads it: retry_wait (when it is due)
	// and outcome_unknown (when the reconciler may claim it; nil: never).
	RunAfter *time.Time
	// Output is set only for awaiting_approval (the plan shown for
	// review); nil keeps the job's output.
	Output []byte
	// Error is the JSON of params.Error; nil keeps the job's last error.
	Error []byte
	// Message is the event's message; CancelledMessage the message when a
	// requested cancel wins.
	Message          string
	CancelledMessage string
	RefundAttempt    bool
}

// Write checks p and returns what the store writes. A To no worker may move
// a job to is ErrTransitionRefused; retry_wait without RunAfter is an error.
func (p *JobTransitionParams) Write() (*JobTransitionWrite, error) {
	allowed, finished := WorkerTransition(p.To)
	if !allowed {
		return nil, ErrTransitionRefused
	}
	w := &JobTransitionWrite{
		To:            p.To,
		Finished:      finished,
		Message:       p.EventMessage(),
		RefundAttempt: p.RefundAttempt,
	}
	w.CancelledMessage = "cancelled: requested while running; was to be: " + w.Message
	switch p.To {
	case JobStatusRetryWait:
		if p.RunAfter == nil {
			return nil, errors.New("store: a transition to retry_wait needs RunAfter")
		}
		w.Parks, w.RunAfter = true, p.RunAfter
	case JobStatusOutcomeUnknown:
		w.Parks, w.RunAfter = true, p.RunAfter
	case JobStatusAwaitingApproval:
		w.Parks, w.Output = true, p.Output
	}
	w.Error = p.Error.json()
	return w, nil
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

// json is the stored form of a job error; nil for none.
func (e *JobError) json() []byte {
	if e == nil {
		return nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // three plain fields always marshal
	}
	return b
}

// ClaimMessage is the message of the running event a claim appends, by the
// status the job was claimed from and its previous lease owner.
func ClaimMessage(from JobStatus, previousOwner string) string {
	switch from {
	case JobStatusRunning:
		return "lease taken over from " + previousOwner
	case JobStatusOutcomeUnknown:
		return "reconciling an unknown outcome"
	}
	return "claimed"
}

// PublishMessage is the message of the published event: message, naming the
// job whose output was published when it was another's.
func PublishMessage(message, deduplicatedFrom string) string {
	if deduplicatedFrom == "" {
		return message
	}
	return message + " (deduplicated from " + deduplicatedFrom + ")"
}

// SubmitMessage is the message of a submitted job's first event, and the
// outcome JobSubmit reports for the job it created.
func SubmitMessage(deduplicatedFrom string) (string, SubmitOutcome) {
	if deduplicatedFrom == "" {
		return "submitted", OutcomeCreated
	}
	return "deduplicated from " + deduplicatedFrom, OutcomeDeduplicated
}

// operatorEventMessage is the message of the event an operator transition
// appends: the action, the operator's message and, when set, the error as
// "code: message".
func operatorEventMessage(action, message string, jobErr *JobError) string {
	if message != "" {
		action += ": " + message
	}
	if jobErr != nil {
		action += " (" + jobErr.Code + ": " + jobErr.Message + ")"
	}
	return action
}

// OperatorTransition is the dialect-free half of one operator call: the
// statuses its conditional UPDATE may start from and the status in which
// it succeeds without a change.
type OperatorTransition struct {
	From []JobStatus
	// Settled is a status in which the call succeeds without a change (a
	// cancel of a cancelled job); empty for none.
	Settled JobStatus
}

// The operator transitions.
var (
	CancelTransition  = OperatorTransition{From: []JobStatus{JobStatusQueued, JobStatusRetryWait, JobStatusAwaitingApproval, JobStatusOutcomeUnknown, JobStatusRunning}, Settled: JobStatusCancelled}
	ReplayTransition  = OperatorTransition{From: []JobStatus{JobStatusFailed, JobStatusDeadLettered}}
	ResolveTransition = OperatorTransition{From: []JobStatus{JobStatusOutcomeUnknown}}
	ApproveTransition = OperatorTransition{From: []JobStatus{JobStatusAwaitingApproval}}
)

// FromStrings is From as the strings the queries compare.
func (t OperatorTransition) FromStrings() []string {
	out := make([]string, len(t.From))
	for i, s := range t.From {
		out[i] = string(s)
	}
	return out
}

// Refusal says what an operator call does when its conditional UPDATE
// matched no row of an existing job, whose status is now current.
type Refusal int

const (
	// RefusalRaced: current is a status the call may start from, so the
	// job changed after the UPDATE's snapshot. Under the job's lock the
	// UPDATE runs again and matches; where writes take turns it cannot
	// happen at all.
	RefusalRaced Refusal = iota + 1
	// RefusalSettled: the job is already where the call leads; the call
	// succeeds and returns it as it is, writing nothing but its key.
	RefusalSettled
	// RefusalRefused: the job's status does not allow the call; the error
	// is a *TransitionRefusedError and nothing is written, key included.
	RefusalRefused
)

// Refuse classifies a job the transition's UPDATE did not match.
func (t OperatorTransition) Refuse(current JobStatus) (Refusal, error) {
	switch {
	case slices.Contains(t.From, current):
		return RefusalRaced, nil
	case t.Settled != "" && current == t.Settled:
		return RefusalSettled, nil
	}
	return RefusalRefused, &TransitionRefusedError{Status: current}
}

// EventMessage is the message of the cancelled event.
func (p *JobCancelParams) EventMessage() string {
	return operatorEventMessage("cancelled", p.Message, nil)
}

// After reports whether s comes after t in the lifecycle; every stage
// comes after "" (none).
func (s JobStage) After(t JobStage) bool {
	return slices.Index(stageOrder, s) > slices.Index(stageOrder, t)
}

// stageOrder is the lifecycle order of stages.
var stageOrder = []JobStage{
	JobStageUploaded,
	JobStageTextExtracted,
	JobStageChunksReady,
	JobStageLLMDone,
	JobStageValidated,
	JobStagePublished,
}

// JobReplayWrite is what a store writes for one JobReplay.
type JobReplayWrite struct {
	// ResetStages are the stages whose checkpoints are deleted (FromStage
	// and every later one), empty without FromStage; a job at one of them
	// goes back to ResetStage, the stage before FromStage. An approval
	// stands only while ResetStages is empty: a recomputed plan is reviewed
	// anew.
	ResetStages []string
	ResetStage  string
	Message     string
}

// Write checks p and returns what the store writes. FromStage published, or
// an unknown stage, is an error: there is nothing to replay from there.
func (p *JobReplayParams) Write() (*JobReplayWrite, error) {
	w := &JobReplayWrite{ResetStages: []string{}, Message: operatorEventMessage("replayed", p.Message, nil)}
	if p.FromStage == "" {
		return w, nil
	}
	i := slices.Index(stageOrder, p.FromStage)
	if i < 0 || p.FromStage == JobStagePublished {
		return nil, fmt.Errorf("store: replay from stage %q: want a stage before published", p.FromStage)
	}
	for _, stage := range stageOrder[i:] {
		w.ResetStages = append(w.ResetStages, string(stage))
	}
	w.ResetStage = string(stageOrder[max(i-1, 0)])
	w.Message = operatorEventMessage("replayed from "+string(p.FromStage), p.Message, nil)
	return w, nil
}

// JobSettleWrite is a settlement: a job no worker holds moved by an
// operator to To (ResolveJob, ApproveJob), with its event.
type JobSettleWrite struct {
	OperatorTransition
	To       JobStatus
	Error    []byte // JSON; nil keeps the job's last error
	Approved bool   // the job's plan is approved
	Finished bool   // finished_at becomes now
	// FreshBudget starts the retry budget again: a retry by hand.
	FreshBudget bool
	Message     string
}

// Write checks p and returns the settlement. A To other than queued or
// failed is an error, not ErrTransitionRefused: it is no transition at all.
func (p *JobResolveParams) Write() (*JobSettleWrite, error) {
	w := &JobSettleWrite{OperatorTransition: ResolveTransition, To: p.To}
	switch p.To {
	case JobStatusQueued:
		w.FreshBudget = true // the operator decided: a new retry budget
		w.Message = operatorEventMessage("resolved: retry", p.Message, nil)
	case JobStatusFailed:
		w.Finished = true
		w.Error = p.Error.json()
		w.Message = operatorEventMessage("resolved: failed", p.Message, p.Error)
	default:
		return nil, fmt.Errorf("store: resolve to %q: want queued or failed", p.To)
	}
	return w, nil
}

// Write returns the settlement: approved, the job is queued to publish (its
// checkpoints make that a publish only); rejected, it is cancelled.
func (p *JobApproveParams) Write() *JobSettleWrite {
	w := &JobSettleWrite{OperatorTransition: ApproveTransition}
	if p.Approve {
		w.To, w.Approved = JobStatusQueued, true
		w.Message = operatorEventMessage("approved", p.Message, nil)
	} else {
		w.To, w.Finished = JobStatusCancelled, true
		w.Message = operatorEventMessage("rejected", p.Message, nil)
	}
	return w
}

// CheckKey answers an idempotency key that was taken before: nil when it
// was taken by this same request (same fingerprint, same job), else
// ErrIdempotencyKeyReused.
func (p *IdempotencyParams) CheckKey(fingerprint, jobID, wantJobID string) error {
	if fingerprint != p.Fingerprint || jobID != wantJobID {
		return ErrIdempotencyKeyReused
	}
	return nil
}
