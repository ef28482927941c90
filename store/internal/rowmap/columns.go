package rowmap

import (
	"time"

	"github.com/oncejob/oncejob/store"
)

// Columns converts the column types whose Go type differs between the two
// stores' sqlc code: a uuid (pgtype.UUID; TEXT), a 32-bit integer (int32;
// INTEGER, read as int64), a boolean (bool; INTEGER 0 or 1) and a timestamp
// (time.Time; INTEGER unix microseconds). Each store has one Columns; the
// row types below take its column types as type parameters, so a store's
// sqlc row converts to them (same field names, order and types) and is
// mapped here once for both stores. A column sqlc adds, drops or reorders
// in either store fails that conversion at compile time.
type Columns[U, I, B, T any] struct {
	UUID  func(U) string
	Int32 func(I) int32
	Bool  func(B) bool
	Time  func(T) time.Time
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
func (c Columns[U, I, B, T]) Checkpoint(r CheckpointRow[U, I, T]) *store.Checkpoint {
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
func (c Columns[U, I, B, T]) LLMAttempt(r LLMAttemptRow[U, I, B, T]) *store.LLMAttempt {
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
func (c Columns[U, I, B, T]) DeliveryAttempt(r DeliveryAttemptRow[I, B, T]) *store.DeliveryAttempt {
	return &store.DeliveryAttempt{
		ID: r.ID, DeliveryID: r.DeliveryID, EventID: r.EventID, Sink: r.Sink, Tenant: r.Tenant,
		Attempt: c.Int32(r.Attempt), Relay: r.Relay, Outcome: store.DeliveryOutcome(r.Outcome),
		HTTPStatus: c.Int32(r.HttpStatus), Error: r.Error, ExternalRef: r.ExternalRef,
		Duplicate: c.Bool(r.Duplicate), StartedAt: c.Time(r.StartedAt), FinishedAt: c.Time(r.FinishedAt),
		LatencyMS: r.LatencyMs,
	}
}
