package store

import (
	"context"
	"time"
)

// FactoryStore is the seam of store/storetest's state factory: it puts a
// job in any state directly, so a test of a rule about status X starts
// from X without driving the job there through the engine, and a refusal
// can be tested from every status. Production code never calls it.
type FactoryStore interface {
	// JobUpdateFull sets every field of params on the job, exactly (a nil
	// or zero field clears its column), and appends an event with the new
	// state and params.Message, in one transaction. Unknown job:
	// ErrNotFound.
	JobUpdateFull(ctx context.Context, params *JobUpdateFullParams) (*Job, error)
}

// JobUpdateFullParams is a job's whole engine state.
type JobUpdateFullParams struct {
	Tenant          string
	ID              string
	Status          JobStatus
	Stage           JobStage
	Attempt         int32
	LeaseOwner      string // empty: none
	LeaseUntil      *time.Time
	RunAfter        *time.Time
	Output          []byte // JSON object
	Error           *JobError
	CancelRequested bool
	Approved        bool
	FinishedAt      *time.Time
	Message         string
}

// ErrorJSON is the stored form of Error; nil for none.
func (p *JobUpdateFullParams) ErrorJSON() []byte { return p.Error.json() }
