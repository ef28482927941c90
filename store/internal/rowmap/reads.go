package rowmap

import (
	"context"
	"time"

	"github.com/oncejob/oncejob/store"
)

// Queries is the part of a store's sqlc code that Reads runs. DB is the
// handle its queries take, CP, LA and J its
// job_checkpoints, llm_attempts and jobs rows, DP, SP, JP and IP the params
// of DocumentGet, CheckpointGetByStageKey, JobComputedSuccessGet and
// JobGetByIdempotencyKey, IR the row of the last, R a runs row and RP the
// params of RunGetByID.
type Queries[DB, CP, LA, J, DP, SP, JP, IP, IR, R, RP any] interface {
	DocumentGet(ctx context.Context, db DB, arg DP) ([]byte, error)
	CheckpointList(ctx context.Context, db DB, jobID string) ([]CP, error)
	CheckpointGetByStageKey(ctx context.Context, db DB, arg SP) (CP, error)
	LLMAttemptList(ctx context.Context, db DB, jobID string) ([]LA, error)
	JobComputedSuccessGet(ctx context.Context, db DB, arg JP) (J, error)
	JobGetByIdempotencyKey(ctx context.Context, db DB, arg IP) (IR, error)
	RunGetByID(ctx context.Context, db DB, arg RP) (R, error)
}

// Reads implements the store methods whose steps are the same in both
// stores (read the id, run the query, map the rows) over a store's sqlc
// Queries: each store embeds one, so the steps are written once while the
// SQL stays in each store's queries. The params and rows are each store's
// own types with the fields named here: a field sqlc adds or renames in
// either store fails at compile time.
type Reads[DB, CP, LA, J any,
	DP ~struct {
		Tenant string
		Sha256 string
	},
	SP ~struct {
		Tenant   string
		StageKey string
	},
	JP ~struct {
		Tenant   string
		DedupKey string
	},
	IP ~struct {
		Tenant         string
		Method         string
		IdempotencyKey string
	},
	IR ~struct {
		Fingerprint string
		Job         J
	},
	R any,
	RP ~struct {
		Tenant string
		ID     string
	},
] struct {
	Q Queries[DB, CP, LA, J, DP, SP, JP, IP, IR, R, RP]
	// DB is where the reads run.
	DB DB
	// ID is the store's value of a uuid: false for a string that is none,
	// which no row has.
	ID func(string) (string, bool)
	// Interpret is the store's reading of a failed query.
	Interpret  func(error) error
	Checkpoint func(CP) *store.Checkpoint
	LLMAttempt func(LA) *store.LLMAttempt
	Job        func(J) (*store.Job, error)
	// RunDefaults gives jobs of runs their runs' params and labels
	// (docs/architecture.md, "Runs"); nil leaves them as read.
	RunDefaults func(context.Context, ...*store.Job) error
	Run         func(R) (*store.Run, error)
	// RunWithProgress is the run of a row with its progress (rows newer
	// than recentSince counted as finished recently).
	RunWithProgress func(ctx context.Context, row R, recentSince time.Time) (*store.Run, error)
}

// DocumentGet implements store.EngineStore.
func (r Reads[DB, CP, LA, J, DP, SP, JP, IP, IR, R, RP]) DocumentGet(ctx context.Context, params *store.DocumentGetParams) ([]byte, error) {
	data, err := r.Q.DocumentGet(ctx, r.DB, DP{Tenant: params.Tenant, Sha256: params.SHA256})
	if err != nil {
		return nil, r.Interpret(err)
	}
	return data, nil
}

// CheckpointList implements store.EngineStore.
func (r Reads[DB, CP, LA, J, DP, SP, JP, IP, IR, R, RP]) CheckpointList(ctx context.Context, params *store.CheckpointListParams) ([]*store.Checkpoint, error) {
	id, ok := r.ID(params.JobID)
	if !ok {
		return nil, nil // no job has an id that is not a uuid
	}
	rows, err := r.Q.CheckpointList(ctx, r.DB, id)
	return Map(rows, err, r.Interpret, r.Checkpoint)
}

// CheckpointGetByStageKey implements store.EngineStore.
func (r Reads[DB, CP, LA, J, DP, SP, JP, IP, IR, R, RP]) CheckpointGetByStageKey(ctx context.Context, params *store.CheckpointGetByStageKeyParams) (*store.Checkpoint, error) {
	row, err := r.Q.CheckpointGetByStageKey(ctx, r.DB, SP{Tenant: params.Tenant, StageKey: params.StageKey})
	return One(row, err, r.Interpret, r.Checkpoint)
}

// LLMAttemptList implements store.EngineStore.
func (r Reads[DB, CP, LA, J, DP, SP, JP, IP, IR, R, RP]) LLMAttemptList(ctx context.Context, params *store.LLMAttemptListParams) ([]*store.LLMAttempt, error) {
	id, ok := r.ID(params.JobID)
	if !ok {
		return nil, nil
	}
	rows, err := r.Q.LLMAttemptList(ctx, r.DB, id)
	return Map(rows, err, r.Interpret, r.LLMAttempt)
}

// JobComputedSuccessGet implements store.EngineStore.
func (r Reads[DB, CP, LA, J, DP, SP, JP, IP, IR, R, RP]) JobComputedSuccessGet(ctx context.Context, params *store.JobComputedSuccessGetParams) (*store.Job, error) {
	row, err := r.Q.JobComputedSuccessGet(ctx, r.DB, JP{Tenant: params.Tenant, DedupKey: params.DedupKey})
	job, err := OneErr(row, err, r.Interpret, r.Job)
	if err != nil {
		return nil, err
	}
	return job, r.runDefaults(ctx, job)
}

// runDefaults is RunDefaults, if set.
func (r Reads[DB, CP, LA, J, DP, SP, JP, IP, IR, R, RP]) runDefaults(ctx context.Context, jobs ...*store.Job) error {
	if r.RunDefaults == nil {
		return nil
	}
	return r.RunDefaults(ctx, jobs...)
}

// JobGetByIdempotencyKey implements store.Store: the job a key names,
// answered as a submission of params would be.
func (r Reads[DB, CP, LA, J, DP, SP, JP, IP, IR, R, RP]) JobGetByIdempotencyKey(ctx context.Context, params *store.JobGetByIdempotencyKeyParams) (*store.JobSubmitResult, error) {
	row, err := r.Q.JobGetByIdempotencyKey(ctx, r.DB, IP{Tenant: params.Tenant, Method: params.Method, IdempotencyKey: params.IdempotencyKey})
	if err != nil {
		return nil, r.Interpret(err)
	}
	keyed := struct {
		Fingerprint string
		Job         J
	}(row)
	job, err := r.Job(keyed.Job)
	if err != nil {
		return nil, err
	}
	if keyed.Fingerprint == params.Fingerprint { // else the key's reuse, without the job
		if err := r.runDefaults(ctx, job); err != nil {
			return nil, err
		}
	}
	return store.JobSubmitExisting(params.Fingerprint, keyed.Fingerprint, job)
}

// RunGet implements store.RunStore.
func (r Reads[DB, CP, LA, J, DP, SP, JP, IP, IR, R, RP]) RunGet(ctx context.Context, params *store.RunGetParams) (*store.Run, error) {
	id, ok := r.ID(params.ID)
	if !ok {
		return nil, store.ErrNotFound
	}
	row, err := r.Q.RunGetByID(ctx, r.DB, RP{Tenant: params.Tenant, ID: id})
	if err != nil {
		return nil, r.Interpret(err)
	}
	if params.WithoutProgress {
		return r.Run(row)
	}
	return r.RunWithProgress(ctx, row, params.RecentSince)
}
