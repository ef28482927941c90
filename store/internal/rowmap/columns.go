package rowmap

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/oncejob/oncejob/store"
)

// Columns converts the column types whose Go type differs between the two
// stores' sqlc code: a uuid (pgtype.UUID; TEXT), a nullable uuid
// (pgtype.UUID; *string, "" for NULL), a 32-bit integer (int32;
// INTEGER, read as int64), a boolean (bool; INTEGER 0 or 1) and a timestamp
// (time.Time; INTEGER unix microseconds), a nullable timestamp, a JSON
// document ([]byte; TEXT) and a nullable one. Each store has one Columns; the
// row types below take its column types as type parameters, so a store's
// sqlc row converts to them (same field names, order and types) and is
// mapped here once for both stores. A column sqlc adds, drops or reorders
// in either store fails that conversion at compile time.
type Columns[U, N, I, B, T, NT, J, NJ any] struct {
	// Store names the store in the errors of a row it cannot map.
	Store    string
	UUID     func(U) string
	NullUUID func(N) string
	Int32    func(I) int32
	Bool     func(B) bool
	Time     func(T) time.Time
	NullTime func(NT) *time.Time
	JSON     func(J) []byte
	NullJSON func(NJ) []byte // nil for NULL
}

// Same is the conversion of a column whose type is already the store type's.
func Same[V any](v V) V { return v }

// CheckpointRow is a job_checkpoints row.
type CheckpointRow[U, I, T any] struct {
	JobID       U
	Tenant      string
	Stage       string
	Chunk       I
	StageKey    string
	CodeVersion string
	Attempt     I
	Output      []byte
	CreatedAt   T
	ReusedFrom  string
}

// Checkpoint is the store value of r.
func (c Columns[U, N, I, B, T, NT, J, NJ]) Checkpoint(r CheckpointRow[U, I, T]) *store.Checkpoint {
	return &store.Checkpoint{
		JobID:       c.UUID(r.JobID),
		Tenant:      r.Tenant,
		Stage:       store.JobStage(r.Stage),
		Chunk:       c.Int32(r.Chunk),
		StageKey:    r.StageKey,
		CodeVersion: r.CodeVersion,
		Attempt:     c.Int32(r.Attempt),
		Output:      r.Output,
		ReusedFrom:  r.ReusedFrom,
		CreatedAt:   c.Time(r.CreatedAt),
	}
}

// LLMAttemptRow is an llm_attempts row.
type LLMAttemptRow[U, I, B, T any] struct {
	ID                int64
	JobID             U
	Tenant            string
	JobAttempt        I
	Stage             string
	Chunk             I
	ProviderKey       string
	Outcome           string
	Billed            B
	PromptTokens      int64
	CompletionTokens  int64
	CostMicros        int64
	LatencyMs         int64
	ProviderRequestID string
	Error             string
	CreatedAt         T
	Model             string
	PriceClass        string
}

// LLMAttempt is the store value of r.
func (c Columns[U, N, I, B, T, NT, J, NJ]) LLMAttempt(r LLMAttemptRow[U, I, B, T]) *store.LLMAttempt {
	return &store.LLMAttempt{
		ID:                r.ID,
		JobID:             c.UUID(r.JobID),
		Tenant:            r.Tenant,
		JobAttempt:        c.Int32(r.JobAttempt),
		Stage:             store.JobStage(r.Stage),
		Chunk:             c.Int32(r.Chunk),
		ProviderKey:       r.ProviderKey,
		Model:             r.Model,
		Outcome:           store.LLMOutcome(r.Outcome),
		Billed:            c.Bool(r.Billed),
		PromptTokens:      r.PromptTokens,
		CompletionTokens:  r.CompletionTokens,
		CostMicros:        r.CostMicros,
		LatencyMillis:     r.LatencyMs,
		ProviderRequestID: r.ProviderRequestID,
		Error:             r.Error,
		CreatedAt:         c.Time(r.CreatedAt),
		PriceClass:        store.PriceClass(r.PriceClass),
	}
}

// DeliveryAttemptRow is a delivery_attempts row.
type DeliveryAttemptRow[I, B, T any] struct {
	ID          int64
	DeliveryID  int64
	EventID     string
	Sink        string
	Tenant      string
	Attempt     I
	Relay       string
	Outcome     string
	HttpStatus  I // sqlc's name, which the conversion must match
	Error       string
	ExternalRef string
	Duplicate   B
	StartedAt   T
	FinishedAt  T
	LatencyMs   int64
}

// DeliveryAttempt is the store value of r.
func (c Columns[U, N, I, B, T, NT, J, NJ]) DeliveryAttempt(r DeliveryAttemptRow[I, B, T]) *store.DeliveryAttempt {
	return &store.DeliveryAttempt{
		ID: r.ID, DeliveryID: r.DeliveryID, EventID: r.EventID, Sink: r.Sink, Tenant: r.Tenant,
		Attempt: c.Int32(r.Attempt), Relay: r.Relay, Outcome: store.DeliveryOutcome(r.Outcome),
		HTTPStatus: c.Int32(r.HttpStatus), Error: r.Error, ExternalRef: r.ExternalRef,
		Duplicate: c.Bool(r.Duplicate), StartedAt: c.Time(r.StartedAt), FinishedAt: c.Time(r.FinishedAt),
		LatencyMS: r.LatencyMs,
	}
}

// RunProgressRow is a row of the RunProgress query: a run's items of one
// status, reused or not.
type RunProgressRow[B any] struct {
	Status           string
	Reused           B
	Items            int64
	Seq              int64
	PromptTokens     int64
	CompletionTokens int64
	CostMicros       int64
	LlmCalls         int64
	FinishedRecently int64
}

// RunProgress is the store value of r.
func (c Columns[U, N, I, B, T, NT, J, NJ]) RunProgress(r RunProgressRow[B]) store.RunProgressRow {
	return store.RunProgressRow{
		Status: store.JobStatus(r.Status), Reused: c.Bool(r.Reused), Items: r.Items, Seq: r.Seq,
		Usage: store.JobUsage{PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
			CostMicros: r.CostMicros, LLMCalls: int32(r.LlmCalls)},
		FinishedRecently: r.FinishedRecently,
	}
}

// ScheduleSlotRow is a schedule_slots row.
type ScheduleSlotRow[U, N, T any] struct {
	ScheduleID U
	SlotAt     T
	Tenant     string
	Outcome    string
	JobID      N
	Reason     string
	DecidedAt  T
}

// ScheduleSlot is the store value of r.
func (c Columns[U, N, I, B, T, NT, J, NJ]) ScheduleSlot(r ScheduleSlotRow[U, N, T]) *store.ScheduleSlot {
	return &store.ScheduleSlot{
		SlotAt: c.Time(r.SlotAt), Outcome: store.SlotOutcome(r.Outcome), JobID: c.NullUUID(r.JobID),
		Reason: r.Reason, DecidedAt: c.Time(r.DecidedAt),
	}
}

// JobRow is a jobs row.
type JobRow[U, N, I, B, T, NT, J, NJ any] struct {
	ID                U
	Tenant            string
	IdempotencyKey    string
	DedupKey          string
	Pipeline          string
	PipelineVersion   I
	PromptVersion     string
	ModelProfile      string
	Status            string
	Stage             string
	Attempt           I
	Output            NJ
	Error             NJ
	DeduplicatedFrom  N
	DocumentSha256    string
	DocumentMediaType string
	DocumentName      string
	DocumentSizeBytes int64
	Params            J
	Labels            J
	PromptTokens      int64
	CompletionTokens  int64
	CostMicros        int64
	LlmCalls          I
	LastEventSeq      I
	LeaseOwner        *string
	LeaseUntil        NT
	CreatedAt         T
	UpdatedAt         T
	FinishedAt        NT
	RunAfter          NT
	CancelRequested   B
	BudgetStartedAt   T
	BudgetAttempts    I
	BudgetTokens      int64
	Approved          B
	Generation        I
	Traceparent       string
	RunID             N
	Priority          *string // NULL: interactive
}

// Job is the store value of r; a stored error or labels that are not the
// JSON they should be is an error naming the job.
func (c Columns[U, N, I, B, T, NT, J, NJ]) Job(r JobRow[U, N, I, B, T, NT, J, NJ]) (*store.Job, error) {
	job := &store.Job{
		ID:               c.UUID(r.ID),
		Tenant:           r.Tenant,
		IdempotencyKey:   r.IdempotencyKey,
		DedupKey:         r.DedupKey,
		Pipeline:         r.Pipeline,
		PipelineVersion:  c.Int32(r.PipelineVersion),
		PromptVersion:    r.PromptVersion,
		ModelProfile:     r.ModelProfile,
		Status:           store.JobStatus(r.Status),
		Stage:            store.JobStage(r.Stage),
		Attempt:          c.Int32(r.Attempt),
		Output:           c.NullJSON(r.Output),
		DeduplicatedFrom: c.NullUUID(r.DeduplicatedFrom),
		Traceparent:      r.Traceparent,
		Usage: store.JobUsage{
			PromptTokens:     r.PromptTokens,
			CompletionTokens: r.CompletionTokens,
			CostMicros:       r.CostMicros,
			LLMCalls:         c.Int32(r.LlmCalls),
		},
		DocumentSHA256: r.DocumentSha256,
		DocumentMedia:  r.DocumentMediaType,
		DocumentName:   r.DocumentName,
		DocumentSize:   r.DocumentSizeBytes,
		Params:         c.JSON(r.Params),
		CreatedAt:      c.Time(r.CreatedAt),
		UpdatedAt:      c.Time(r.UpdatedAt),
		FinishedAt:     c.NullTime(r.FinishedAt),

		LeaseUntil:      c.NullTime(r.LeaseUntil),
		RunAfter:        c.NullTime(r.RunAfter),
		CancelRequested: c.Bool(r.CancelRequested),
		BudgetStartedAt: c.Time(r.BudgetStartedAt),
		BudgetAttempts:  c.Int32(r.BudgetAttempts),
		BudgetTokens:    r.BudgetTokens,
		Approved:        c.Bool(r.Approved),
		RunID:           c.NullUUID(r.RunID),
		Priority:        store.JobPriorityInteractive,
	}
	if r.LeaseOwner != nil {
		job.LeaseOwner = *r.LeaseOwner
	}
	if r.Priority != nil {
		job.Priority = store.JobPriority(*r.Priority)
	}
	if e := c.NullJSON(r.Error); e != nil {
		job.Error = new(store.JobError)
		if err := json.Unmarshal(e, job.Error); err != nil {
			return nil, fmt.Errorf("%s: job %s: error column: %w", c.Store, job.ID, err)
		}
	}
	if err := json.Unmarshal(c.JSON(r.Labels), &job.Labels); err != nil {
		return nil, fmt.Errorf("%s: job %s: labels column: %w", c.Store, job.ID, err)
	}
	return job, nil
}

// DeliveryRow is a deliveries row.
type DeliveryRow[U, I, T, NT any] struct {
	ID              int64
	OutboxID        int64
	EventID         string
	EventType       string
	Sink            string
	Tenant          string
	JobID           U
	Status          string
	Attempt         I
	Attempts        I
	DueAt           T
	LeaseOwner      *string
	LastOutcome     string
	LastError       string
	ExternalRef     string
	BudgetStartedAt T
	CreatedAt       T
	UpdatedAt       T
	DeliveredAt     NT
	Landed          string
}

// Delivery is the store value of r.
func (c Columns[U, N, I, B, T, NT, J, NJ]) Delivery(r DeliveryRow[U, I, T, NT]) *store.Delivery {
	d := &store.Delivery{
		ID: r.ID, OutboxID: r.OutboxID, EventID: r.EventID, EventType: r.EventType, Sink: r.Sink,
		Tenant: r.Tenant, JobID: c.UUID(r.JobID), Status: store.DeliveryStatus(r.Status),
		Attempt: c.Int32(r.Attempt), Attempts: c.Int32(r.Attempts), DueAt: c.Time(r.DueAt),
		LastOutcome: store.DeliveryOutcome(r.LastOutcome), LastError: r.LastError,
		ExternalRef: r.ExternalRef, BudgetStartedAt: c.Time(r.BudgetStartedAt), CreatedAt: c.Time(r.CreatedAt),
		UpdatedAt: c.Time(r.UpdatedAt), DeliveredAt: c.NullTime(r.DeliveredAt),
	}
	if r.LeaseOwner != nil {
		d.LeaseOwner = *r.LeaseOwner
	}
	return d
}

// RunRow is a runs row.
type RunRow[U, B, T, NT, J any] struct {
	ID            U
	Tenant        string
	IdemKey       string
	Fingerprint   string
	Name          string
	Pipeline      string
	ModelProfile  string
	Params        J
	Labels        J
	CreatedAt     T
	CancelledAt   NT
	ProviderBatch B
}

// Run is the store value of r, without its progress; labels that are not
// the JSON they should be are an error naming the run.
func (c Columns[U, N, I, B, T, NT, J, NJ]) Run(r RunRow[U, B, T, NT, J]) (*store.Run, error) {
	run := &store.Run{
		ID: c.UUID(r.ID), Tenant: r.Tenant, IdempotencyKey: r.IdemKey, Fingerprint: r.Fingerprint,
		Name: r.Name, Pipeline: r.Pipeline, ModelProfile: r.ModelProfile, Params: c.JSON(r.Params),
		CreatedAt: c.Time(r.CreatedAt), CancelledAt: c.NullTime(r.CancelledAt), ProviderBatch: c.Bool(r.ProviderBatch),
	}
	if err := json.Unmarshal(c.JSON(r.Labels), &run.Labels); err != nil {
		return nil, fmt.Errorf("%s: run %s: labels column: %w", c.Store, run.ID, err)
	}
	return run, nil
}
