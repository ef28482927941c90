package rowmap

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/oncejob/oncejob/store"
)

// Columns converts the one column type whose Go type differs between the
// two stores' sqlc code, a timestamp T: time.Time in Postgres, INTEGER unix
// microseconds in SQLite. Every other column both stores share has one Go
// type in both, set by sqlc.yaml's overrides: a uuid is a string (*string
// when nullable), an integer int64 (a Postgres integer too), a boolean bool
// (SQLite's INTEGER 0 or 1 too), a JSON document a string (*string when
// nullable). Each store has one Columns; the row types below
// take its timestamp type as their type parameter, so a store's sqlc row
// converts to them (same field names, order and types) and is mapped here
// once for both stores. A column sqlc adds, drops, reorders or types
// differently in either store fails that conversion at compile time.
type Columns[T any] struct {
	// Store names the store in the errors of a row it cannot map.
	Store string
	Time  func(T) time.Time
}

// Same is the conversion of a column whose type is already the store type's.
func Same[V any](v V) V { return v }

// NullTime is Time of a nullable timestamp: nil for NULL.
func (c Columns[T]) NullTime(t *T) *time.Time {
	if t == nil {
		return nil
	}
	return new(c.Time(*t))
}

// Deref is *s, or "" for NULL.
func Deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// StringOrNil is b as a nullable text or JSON column: nil (NULL) for nil.
func StringOrNil(b []byte) *string {
	if b == nil {
		return nil
	}
	return new(string(b))
}

// JSONObject is a JSON object column's text of b: "{}" for empty params,
// which are sent neither as NULL nor as text that is no JSON.
func JSONObject(b []byte) string {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}

// NullJSON is a nullable JSON document's bytes: nil for NULL.
func NullJSON(s *string) []byte {
	if s == nil {
		return nil
	}
	return []byte(*s)
}

// CheckpointRow is a job_checkpoints row.
type CheckpointRow[T any] struct {
	JobID       string
	Tenant      string
	Stage       string
	Chunk       int64
	StageKey    string
	CodeVersion string
	Attempt     int64
	Output      []byte
	CreatedAt   T
	ReusedFrom  string
}

// Checkpoint is the store value of r.
func (c Columns[T]) Checkpoint(r CheckpointRow[T]) *store.Checkpoint {
	return &store.Checkpoint{
		JobID:       r.JobID,
		Tenant:      r.Tenant,
		Stage:       store.JobStage(r.Stage),
		Chunk:       int32(r.Chunk),
		StageKey:    r.StageKey,
		CodeVersion: r.CodeVersion,
		Attempt:     int32(r.Attempt),
		Output:      r.Output,
		ReusedFrom:  r.ReusedFrom,
		CreatedAt:   c.Time(r.CreatedAt),
	}
}

// LLMAttemptRow is an llm_attempts row.
type LLMAttemptRow[T any] struct {
	ID                int64
	JobID             string
	Tenant            string
	JobAttempt        int64
	Stage             string
	Chunk             int64
	ProviderKey       string
	Outcome           string
	Billed            bool
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
func (c Columns[T]) LLMAttempt(r LLMAttemptRow[T]) *store.LLMAttempt {
	return &store.LLMAttempt{
		ID:                r.ID,
		JobID:             r.JobID,
		Tenant:            r.Tenant,
		JobAttempt:        int32(r.JobAttempt),
		Stage:             store.JobStage(r.Stage),
		Chunk:             int32(r.Chunk),
		ProviderKey:       r.ProviderKey,
		Model:             r.Model,
		Outcome:           store.LLMOutcome(r.Outcome),
		Billed:            r.Billed,
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
type DeliveryAttemptRow[T any] struct {
	ID          int64
	DeliveryID  int64
	EventID     string
	Sink        string
	Tenant      string
	Attempt     int64
	Relay       string
	Outcome     string
	HttpStatus  int64 // sqlc's name, which the conversion must match
	Error       string
	ExternalRef string
	Duplicate   bool
	StartedAt   T
	FinishedAt  T
	LatencyMs   int64
}

// DeliveryAttempt is the store value of r.
func (c Columns[T]) DeliveryAttempt(r DeliveryAttemptRow[T]) *store.DeliveryAttempt {
	return &store.DeliveryAttempt{
		ID: r.ID, DeliveryID: r.DeliveryID, EventID: r.EventID, Sink: r.Sink, Tenant: r.Tenant,
		Attempt: int32(r.Attempt), Relay: r.Relay, Outcome: store.DeliveryOutcome(r.Outcome),
		HTTPStatus: int32(r.HttpStatus), Error: r.Error, ExternalRef: r.ExternalRef,
		Duplicate: r.Duplicate, StartedAt: c.Time(r.StartedAt), FinishedAt: c.Time(r.FinishedAt),
		LatencyMS: r.LatencyMs,
	}
}

// RunProgressRow is a row of the RunProgress query: a run's items of one
// status, reused or not.
type RunProgressRow struct {
	Status           string
	Reused           bool
	Items            int64
	Seq              int64
	PromptTokens     int64
	CompletionTokens int64
	CostMicros       int64
	LlmCalls         int64
	FinishedRecently int64
}

// RunProgress is the store value of r.
func (c Columns[T]) RunProgress(r RunProgressRow) store.RunProgressRow {
	return store.RunProgressRow{
		Status: store.JobStatus(r.Status), Reused: r.Reused, Items: r.Items, Seq: r.Seq,
		Usage: store.JobUsage{PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
			CostMicros: r.CostMicros, LLMCalls: int32(r.LlmCalls)},
		FinishedRecently: r.FinishedRecently,
	}
}

// ScheduleSlotRow is a schedule_slots row.
type ScheduleSlotRow[T any] struct {
	ScheduleID string
	SlotAt     T
	Tenant     string
	Outcome    string
	JobID      *string
	Reason     string
	DecidedAt  T
}

// ScheduleSlot is the store value of r.
func (c Columns[T]) ScheduleSlot(r ScheduleSlotRow[T]) *store.ScheduleSlot {
	return &store.ScheduleSlot{
		SlotAt: c.Time(r.SlotAt), Outcome: store.SlotOutcome(r.Outcome), JobID: Deref(r.JobID),
		Reason: r.Reason, DecidedAt: c.Time(r.DecidedAt),
	}
}

// JobRow is a jobs row.
type JobRow[T any] struct {
	ID                string
	Tenant            string
	IdempotencyKey    string
	DedupKey          string
	Pipeline          string
	PipelineVersion   int64
	PromptVersion     string
	ModelProfile      string
	Status            string
	Stage             string
	Attempt           int64
	Output            *string
	Error             *string
	DeduplicatedFrom  *string
	DocumentSha256    string
	DocumentMediaType string
	DocumentName      string
	DocumentSizeBytes int64
	Params            string
	Labels            string
	PromptTokens      int64
	CompletionTokens  int64
	CostMicros        int64
	LlmCalls          int64
	LastEventSeq      int64
	LeaseOwner        *string
	LeaseUntil        *T
	CreatedAt         T
	UpdatedAt         T
	FinishedAt        *T
	RunAfter          *T
	CancelRequested   bool
	BudgetStartedAt   T
	BudgetAttempts    int64
	BudgetTokens      int64
	Approved          bool
	Generation        int64
	Traceparent       string
	RunID             *string
	Priority          *string // NULL: interactive
}

// Job is the store value of r; a stored error or labels that are not the
// JSON they should be is an error naming the job.
func (c Columns[T]) Job(r JobRow[T]) (*store.Job, error) {
	job := &store.Job{
		ID:               r.ID,
		Tenant:           r.Tenant,
		IdempotencyKey:   r.IdempotencyKey,
		DedupKey:         r.DedupKey,
		Pipeline:         r.Pipeline,
		PipelineVersion:  int32(r.PipelineVersion),
		PromptVersion:    r.PromptVersion,
		ModelProfile:     r.ModelProfile,
		Status:           store.JobStatus(r.Status),
		Stage:            store.JobStage(r.Stage),
		Attempt:          int32(r.Attempt),
		Output:           NullJSON(r.Output),
		DeduplicatedFrom: Deref(r.DeduplicatedFrom),
		Traceparent:      r.Traceparent,
		Usage: store.JobUsage{
			PromptTokens:     r.PromptTokens,
			CompletionTokens: r.CompletionTokens,
			CostMicros:       r.CostMicros,
			LLMCalls:         int32(r.LlmCalls),
		},
		DocumentSHA256: r.DocumentSha256,
		DocumentMedia:  r.DocumentMediaType,
		DocumentName:   r.DocumentName,
		DocumentSize:   r.DocumentSizeBytes,
		Params:         []byte(r.Params),
		CreatedAt:      c.Time(r.CreatedAt),
		UpdatedAt:      c.Time(r.UpdatedAt),
		FinishedAt:     c.NullTime(r.FinishedAt),

		LeaseUntil:      c.NullTime(r.LeaseUntil),
		RunAfter:        c.NullTime(r.RunAfter),
		CancelRequested: r.CancelRequested,
		BudgetStartedAt: c.Time(r.BudgetStartedAt),
		BudgetAttempts:  int32(r.BudgetAttempts),
		BudgetTokens:    r.BudgetTokens,
		Approved:        r.Approved,
		RunID:           Deref(r.RunID),
		Priority:        store.JobPriorityInteractive,
	}
	if r.LeaseOwner != nil {
		job.LeaseOwner = *r.LeaseOwner
	}
	if r.Priority != nil {
		job.Priority = store.JobPriority(*r.Priority)
	}
	if e := NullJSON(r.Error); e != nil {
		job.Error = new(store.JobError)
		if err := json.Unmarshal(e, job.Error); err != nil {
			return nil, fmt.Errorf("%s: job %s: error column: %w", c.Store, job.ID, err)
		}
	}
	if err := json.Unmarshal([]byte(r.Labels), &job.Labels); err != nil {
		return nil, fmt.Errorf("%s: job %s: labels column: %w", c.Store, job.ID, err)
	}
	return job, nil
}

// DeliveryRow is a deliveries row.
type DeliveryRow[T any] struct {
	ID              int64
	OutboxID        int64
	EventID         string
	EventType       string
	Sink            string
	Tenant          string
	JobID           string
	Status          string
	Attempt         int64
	Attempts        int64
	DueAt           T
	LeaseOwner      *string
	LastOutcome     string
	LastError       string
	ExternalRef     string
	BudgetStartedAt T
	CreatedAt       T
	UpdatedAt       T
	DeliveredAt     *T
	Landed          string
}

// Delivery is the store value of r.
func (c Columns[T]) Delivery(r DeliveryRow[T]) *store.Delivery {
	d := &store.Delivery{
		ID: r.ID, OutboxID: r.OutboxID, EventID: r.EventID, EventType: r.EventType, Sink: r.Sink,
		Tenant: r.Tenant, JobID: r.JobID, Status: store.DeliveryStatus(r.Status),
		Attempt: int32(r.Attempt), Attempts: int32(r.Attempts), DueAt: c.Time(r.DueAt),
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
type RunRow[T any] struct {
	ID            string
	Tenant        string
	IdemKey       string
	Fingerprint   string
	Name          string
	Pipeline      string
	ModelProfile  string
	Params        string
	Labels        string
	CreatedAt     T
	CancelledAt   *T
	ProviderBatch bool
}

// Run is the store value of r, without its progress; labels that are not
// the JSON they should be are an error naming the run.
func (c Columns[T]) Run(r RunRow[T]) (*store.Run, error) {
	run := &store.Run{
		ID: r.ID, Tenant: r.Tenant, IdempotencyKey: r.IdemKey, Fingerprint: r.Fingerprint,
		Name: r.Name, Pipeline: r.Pipeline, ModelProfile: r.ModelProfile, Params: []byte(r.Params),
		CreatedAt: c.Time(r.CreatedAt), CancelledAt: c.NullTime(r.CancelledAt), ProviderBatch: r.ProviderBatch,
	}
	if err := json.Unmarshal([]byte(r.Labels), &run.Labels); err != nil {
		return nil, fmt.Errorf("%s: run %s: labels column: %w", c.Store, run.ID, err)
	}
	return run, nil
}

// APIKeyRow is an api_keys row.
type APIKeyRow[T any] struct {
	ID         string
	Tenant     string
	Role       string
	Name       string
	Sha256     string
	CreatedAt  T
	RevokedAt  *T
	LastUsedAt *T
}

// APIKey is the store value of r.
func (c Columns[T]) APIKey(r APIKeyRow[T]) *store.APIKey {
	return &store.APIKey{
		ID: r.ID, Tenant: r.Tenant, Role: store.Role(r.Role), Name: r.Name, SHA256: r.Sha256,
		CreatedAt: c.Time(r.CreatedAt), RevokedAt: c.NullTime(r.RevokedAt), LastUsedAt: c.NullTime(r.LastUsedAt),
	}
}

// SinkStateRow is a sink_states row.
type SinkStateRow[T any] struct {
	Sink       string
	Tenant     string
	DisabledAt T
	Reason     string
}

// SinkState is the store value of r.
func (c Columns[T]) SinkState(r SinkStateRow[T]) *store.SinkState {
	return &store.SinkState{Sink: r.Sink, Tenant: r.Tenant, DisabledAt: c.Time(r.DisabledAt), Reason: r.Reason}
}

// ScheduleRow is a schedules row.
type ScheduleRow[T any] struct {
	ID             string
	Tenant         string
	IdemKey        string
	Fingerprint    string
	Name           string
	Cron           string
	IntervalMs     int64
	TimeZone       string
	Job            string
	Overlap        string
	Catchup        string
	MisfireMs      int64
	Paused         bool
	DeletedAt      *T
	NextSlotAt     T
	LastJobID      *string
	BufferedSlotAt *T
	LeaseOwner     *string
	LeaseUntil     *T
	CreatedAt      T
	UpdatedAt      T
}

// Schedule is the store value of r, without its recent slots.
func (c Columns[T]) Schedule(r ScheduleRow[T]) *store.Schedule {
	return &store.Schedule{
		ID: r.ID, Tenant: r.Tenant, IdempotencyKey: r.IdemKey, Fingerprint: r.Fingerprint, Name: r.Name,
		Cron: r.Cron, Interval: time.Duration(r.IntervalMs) * time.Millisecond, TimeZone: r.TimeZone, Job: []byte(r.Job),
		Overlap: store.OverlapPolicy(r.Overlap), Catchup: store.CatchupPolicy(r.Catchup),
		Misfire: time.Duration(r.MisfireMs) * time.Millisecond, Paused: r.Paused, NextSlotAt: c.Time(r.NextSlotAt),
		LastJobID: Deref(r.LastJobID), BufferedSlotAt: c.NullTime(r.BufferedSlotAt), LeaseOwner: Deref(r.LeaseOwner),
		LeaseUntil: c.NullTime(r.LeaseUntil), CreatedAt: c.Time(r.CreatedAt),
	}
}

// JobEventRow is a job_events row. Postgres's also has the transaction id
// the change feed orders by (tx), which is not the event's: its store
// copies the other columns into a JobEventRow.
type JobEventRow[T any] struct {
	JobID         string
	Seq           int64
	Status        string
	Stage         string
	Attempt       int64
	Message       string
	CreatedAt     T
	Tenant        string
	ID            int64
	ActorKey      string
	ActorRole     string
	ActorRpc      string // sqlc's name, which the conversion must match
	NextAttemptAt *T
}

// JobEvent is the store value of r.
func (c Columns[T]) JobEvent(r JobEventRow[T]) *store.JobEvent {
	return &store.JobEvent{
		JobID: r.JobID, Seq: int32(r.Seq), Status: store.JobStatus(r.Status), Stage: store.JobStage(r.Stage),
		Attempt: int32(r.Attempt), Message: r.Message, CreatedAt: c.Time(r.CreatedAt),
		Actor: store.ActorFrom(r.ActorKey, r.ActorRole, r.ActorRpc), NextAttemptAt: c.NullTime(r.NextAttemptAt),
	}
}
