package storetest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/oncejob/oncejob/store"
)

// The helpers below are the conformance suite's seam for tests that move one
// job at a time. Production writes in batches (JobPublishMany,
// CheckpointWriteMany, JobHeartbeatMany), so the store interfaces hold only
// those; a test's one-job write is the batch of one, and what a test asserts
// through these helpers holds for the production method.

// Publisher is a store that publishes jobs (store.EngineStore).
type Publisher interface {
	JobPublishMany(ctx context.Context, params *store.JobPublishManyParams) (*store.JobPublishManyResult, error)
}

// Publish publishes one job as JobPublishMany does: the published job, or
// its item's error (ErrLeaseLost when the lease is gone).
func Publish(ctx context.Context, s Publisher, params *store.JobPublishParams) (*store.Job, error) {
	res, err := s.JobPublishMany(ctx, &store.JobPublishManyParams{Jobs: []*store.JobPublishParams{params}})
	if err != nil {
		return nil, err
	}
	if len(res.Items) != 1 {
		return nil, fmt.Errorf("storetest: JobPublishMany answered %d items for one job", len(res.Items))
	}
	return res.Items[0].Job, res.Items[0].Err
}

// CheckpointWriter is a store that writes checkpoints (store.EngineStore).
type CheckpointWriter interface {
	CheckpointWriteMany(ctx context.Context, params *store.CheckpointWriteManyParams) error
}

// CheckpointWriteParams is one checkpoint and the lease that fences it.
type CheckpointWriteParams struct {
	Lease        store.Lease
	Stage        store.JobStage
	Chunk        int32 // -1 for the stage as a whole
	StageKey     string
	CodeVersion  string
	Output       []byte
	ReusedFrom   string // the job the decision cache served Output from; empty: computed
	AdvanceStage bool
	Message      string // of the event when AdvanceStage
}

// CheckpointWrite writes one checkpoint as CheckpointWriteMany does.
func CheckpointWrite(ctx context.Context, s CheckpointWriter, params *CheckpointWriteParams) error {
	return s.CheckpointWriteMany(ctx, &store.CheckpointWriteManyParams{
		Lease: params.Lease,
		Checkpoints: []store.StageCheckpoint{{
			Stage: params.Stage, Chunk: params.Chunk, StageKey: params.StageKey, CodeVersion: params.CodeVersion,
			Output: params.Output, ReusedFrom: params.ReusedFrom, AdvanceStage: params.AdvanceStage, Message: params.Message,
		}},
	})
}

// Completer is a store whose jobs a test can finish without a worker: it
// reads jobs (store.Store) and has the state factory's seam
// (store.FactoryStore).
type Completer interface {
	JobGetByID(ctx context.Context, params *store.JobGetByIDParams) (*store.Job, error)
	JobUpdateFull(ctx context.Context, params *store.JobUpdateFullParams) (*store.Job, error)
}

// CompleteParams names the job to complete and its output.
type CompleteParams struct {
	Tenant string
	ID     string
	Output []byte // JSON object
}

// Complete makes a job of any non-terminal status a computed success, with
// no worker and no lease: status succeeded, stage published, the output,
// finished now, and its event. A terminal, foreign or unknown job is
// ErrNotFound; a second computed success of the job's dedup key is
// ErrDuplicateComputation (the stores' unique index refuses it). It reads,
// then writes: for tests that set a job up, not for races.
func Complete(ctx context.Context, s Completer, params *CompleteParams) (*store.Job, error) {
	job, err := s.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: params.Tenant, ID: params.ID})
	if err != nil {
		return nil, err
	}
	if job.Status.Terminal() {
		return nil, store.ErrNotFound
	}
	return s.JobUpdateFull(ctx, &store.JobUpdateFullParams{
		Tenant:     job.Tenant,
		ID:         job.ID,
		Status:     store.JobStatusSucceeded,
		Stage:      store.JobStagePublished,
		Attempt:    job.Attempt,
		Output:     params.Output,
		Approved:   job.Approved,
		FinishedAt: new(time.Now()),
		Message:    "published",
	})
}

// heartbeater is a store that extends leases (store.EngineStore).
type heartbeater interface {
	JobHeartbeatMany(ctx context.Context, params *store.JobHeartbeatManyParams) (*store.JobHeartbeatManyResult, error)
}

type heartbeatParams struct {
	Lease         store.Lease
	LeaseDuration time.Duration
	Now           *time.Time
}

type heartbeatResult struct {
	CancelRequested bool
}

// heartbeat extends one lease as JobHeartbeatMany does: ErrLeaseLost when
// it is gone.
func heartbeat(ctx context.Context, s heartbeater, params *heartbeatParams) (*heartbeatResult, error) {
	res, err := s.JobHeartbeatMany(ctx, &store.JobHeartbeatManyParams{
		Leases: []store.Lease{params.Lease}, LeaseDuration: params.LeaseDuration, Now: params.Now,
	})
	if err != nil {
		return nil, err
	}
	if len(res.Lost) > 0 {
		return nil, store.ErrLeaseLost
	}
	return &heartbeatResult{CancelRequested: slices.Contains(res.CancelRequested, params.Lease.JobID)}, nil
}
