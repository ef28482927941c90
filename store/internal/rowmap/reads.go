package rowmap

import (
	"context"
	"time"

	"github.com/oncejob/oncejob/store"
)

// Reads implements the store methods whose steps are the same in both
// stores (read the id, run the query, map the rows): each store embeds one,
// so the steps are written once while the SQL stays in each store's
// queries. Each field but ID is one of a store's sqlc queries on its read
// handle, its params built from the store method's and its rows mapped,
// made by the function of the same name below (each store's newReads): the
// params and rows are the store's own sqlc types with the fields named
// there, so a field sqlc adds or renames in either store fails to compile.
type Reads struct {
	// ID is the store's value of a uuid: false for a string that is none,
	// which no row has.
	ID func(string) (string, bool)
	// RunDefaults gives jobs of runs their runs' params and labels
	// (docs/architecture.md, "Runs"); nil leaves them as read.
	RunDefaults func(context.Context, ...*store.Job) error

	Document        func(context.Context, *store.DocumentGetParams) ([]byte, error)
	Checkpoints     func(ctx context.Context, jobID string) ([]*store.Checkpoint, error)
	CheckpointByKey func(context.Context, *store.CheckpointGetByStageKeyParams) (*store.Checkpoint, error)
	LLMAttempts     func(ctx context.Context, jobID string) ([]*store.LLMAttempt, error)
	ComputedSuccess func(context.Context, *store.JobComputedSuccessGetParams) (*store.Job, error)
	Keyed           func(context.Context, *store.JobGetByIdempotencyKeyParams) (fingerprint string, job *store.Job, err error)
	Run             func(ctx context.Context, params *store.RunGetParams, id string) (*store.Run, error)
	APIKey          func(ctx context.Context, id string) (*store.APIKey, error)
	APIKeys         func(context.Context, *store.APIKeyListParams) ([]*store.APIKey, error)
	Events          func(ctx context.Context, params *store.JobEventListParams, jobID string) ([]*store.JobEvent, error)
	SinkStates      func(ctx context.Context, tenant string) ([]*store.SinkState, error)
	// RecentSlots is a schedule's last store.ScheduleRecentSlots slots,
	// which every schedule a store answers carries (WithSlots).
	RecentSlots func(ctx context.Context, scheduleID string) ([]*store.ScheduleSlot, error)
}

// DocumentGet implements store.EngineStore.
func (r Reads) DocumentGet(ctx context.Context, params *store.DocumentGetParams) ([]byte, error) {
	return r.Document(ctx, params)
}

// CheckpointList implements store.EngineStore.
func (r Reads) CheckpointList(ctx context.Context, params *store.CheckpointListParams) ([]*store.Checkpoint, error) {
	id, ok := r.ID(params.JobID)
	if !ok {
		return nil, nil // no job has an id that is not a uuid
	}
	return r.Checkpoints(ctx, id)
}

// CheckpointGetByStageKey implements store.EngineStore.
func (r Reads) CheckpointGetByStageKey(ctx context.Context, params *store.CheckpointGetByStageKeyParams) (*store.Checkpoint, error) {
	return r.CheckpointByKey(ctx, params)
}

// LLMAttemptList implements store.EngineStore.
func (r Reads) LLMAttemptList(ctx context.Context, params *store.LLMAttemptListParams) ([]*store.LLMAttempt, error) {
	id, ok := r.ID(params.JobID)
	if !ok {
		return nil, nil
	}
	return r.LLMAttempts(ctx, id)
}

// JobComputedSuccessGet implements store.EngineStore.
func (r Reads) JobComputedSuccessGet(ctx context.Context, params *store.JobComputedSuccessGetParams) (*store.Job, error) {
	job, err := r.ComputedSuccess(ctx, params)
	if err != nil {
		return nil, err
	}
	return job, r.runDefaults(ctx, job)
}

// runDefaults is RunDefaults, if set.
func (r Reads) runDefaults(ctx context.Context, jobs ...*store.Job) error {
	if r.RunDefaults == nil {
		return nil
	}
	return r.RunDefaults(ctx, jobs...)
}

// JobGetByIdempotencyKey implements store.Store: the job a key names,
// answered as a submission of params would be.
func (r Reads) JobGetByIdempotencyKey(ctx context.Context, params *store.JobGetByIdempotencyKeyParams) (*store.JobSubmitResult, error) {
	fingerprint, job, err := r.Keyed(ctx, params)
	if err != nil {
		return nil, err
	}
	if fingerprint == params.Fingerprint { // else the key's reuse, without the job
		if err := r.runDefaults(ctx, job); err != nil {
			return nil, err
		}
	}
	return store.JobSubmitExisting(params.Fingerprint, fingerprint, job)
}

// RunGet implements store.RunStore.
func (r Reads) RunGet(ctx context.Context, params *store.RunGetParams) (*store.Run, error) {
	id, ok := r.ID(params.ID)
	if !ok {
		return nil, store.ErrNotFound
	}
	return r.Run(ctx, params, id)
}

// APIKeyGetByID implements store.APIKeyStore.
func (r Reads) APIKeyGetByID(ctx context.Context, params *store.APIKeyGetByIDParams) (*store.APIKey, error) {
	return r.APIKey(ctx, params.ID)
}

// APIKeyList implements store.APIKeyStore.
func (r Reads) APIKeyList(ctx context.Context, params *store.APIKeyListParams) ([]*store.APIKey, error) {
	return r.APIKeys(ctx, params)
}

// JobEventList implements store.Store.
func (r Reads) JobEventList(ctx context.Context, params *store.JobEventListParams) ([]*store.JobEvent, error) {
	id, ok := r.ID(params.JobID)
	if !ok {
		return nil, store.ErrNotFound
	}
	return r.Events(ctx, params, id)
}

// SinkStateList implements store.DeliveryStore.
func (r Reads) SinkStateList(ctx context.Context, params *store.SinkStateListParams) ([]*store.SinkState, error) {
	return r.SinkStates(ctx, params.Tenant)
}

// Handle is where a store's reads run, DB, and its reading of a failed
// query, Interpret: what every function below binds a query to.
type Handle[DB any] struct {
	DB        DB
	Interpret func(error) error
	// Snapshot, when set, runs read with a handle on which the reads of
	// one store call that must agree (JobEvents) see one snapshot; nil
	// runs read on DB.
	Snapshot func(ctx context.Context, read func(DB) error) error
}

// snapshot is Snapshot, or read on DB.
func (h Handle[DB]) snapshot(ctx context.Context, read func(DB) error) error {
	if h.Snapshot == nil {
		return read(h.DB)
	}
	return h.Snapshot(ctx, read)
}

// DocumentGet is Reads.Document over a store's DocumentGet query.
func DocumentGet[DB any, P ~struct{ Tenant, Sha256 string }](h Handle[DB], q interface {
	DocumentGet(context.Context, DB, P) ([]byte, error)
}) func(context.Context, *store.DocumentGetParams) ([]byte, error) {
	return func(ctx context.Context, params *store.DocumentGetParams) ([]byte, error) {
		data, err := q.DocumentGet(ctx, h.DB, P{Tenant: params.Tenant, Sha256: params.SHA256})
		return One(data, err, h.Interpret, Same)
	}
}

// CheckpointList is Reads.Checkpoints over a store's CheckpointList
// query, its rows mapped by f.
func CheckpointList[DB, R any](h Handle[DB], q interface {
	CheckpointList(ctx context.Context, db DB, jobID string) ([]R, error)
}, f func(R) *store.Checkpoint) func(context.Context, string) ([]*store.Checkpoint, error) {
	return func(ctx context.Context, jobID string) ([]*store.Checkpoint, error) {
		rows, err := q.CheckpointList(ctx, h.DB, jobID)
		return Map(rows, err, h.Interpret, f)
	}
}

// CheckpointGetByStageKey is Reads.CheckpointByKey over a store's
// CheckpointGetByStageKey query, its row mapped by f.
func CheckpointGetByStageKey[DB any, P ~struct{ Tenant, StageKey string }, R any](h Handle[DB], q interface {
	CheckpointGetByStageKey(context.Context, DB, P) (R, error)
}, f func(R) *store.Checkpoint) func(context.Context, *store.CheckpointGetByStageKeyParams) (*store.Checkpoint, error) {
	return func(ctx context.Context, params *store.CheckpointGetByStageKeyParams) (*store.Checkpoint, error) {
		row, err := q.CheckpointGetByStageKey(ctx, h.DB, P{Tenant: params.Tenant, StageKey: params.StageKey})
		return One(row, err, h.Interpret, f)
	}
}

// LLMAttemptList is Reads.LLMAttempts over a store's LLMAttemptList query,
// its rows mapped by f.
func LLMAttemptList[DB, R any](h Handle[DB], q interface {
	LLMAttemptList(ctx context.Context, db DB, jobID string) ([]R, error)
}, f func(R) *store.LLMAttempt) func(context.Context, string) ([]*store.LLMAttempt, error) {
	return func(ctx context.Context, jobID string) ([]*store.LLMAttempt, error) {
		rows, err := q.LLMAttemptList(ctx, h.DB, jobID)
		return Map(rows, err, h.Interpret, f)
	}
}

// JobComputedSuccessGet is Reads.ComputedSuccess over a store's
// JobComputedSuccessGet query, its row mapped by job.
func JobComputedSuccessGet[DB any, P ~struct{ Tenant, DedupKey string }, R any](h Handle[DB], q interface {
	JobComputedSuccessGet(context.Context, DB, P) (R, error)
}, job func(R) (*store.Job, error)) func(context.Context, *store.JobComputedSuccessGetParams) (*store.Job, error) {
	return func(ctx context.Context, params *store.JobComputedSuccessGetParams) (*store.Job, error) {
		row, err := q.JobComputedSuccessGet(ctx, h.DB, P{Tenant: params.Tenant, DedupKey: params.DedupKey})
		return OneErr(row, err, h.Interpret, job)
	}
}

// JobGetByIdempotencyKey is a store's JobGetByIdempotencyKey query on h,
// its row (the key's fingerprint and its job's row) for KeyedJob to map.
func JobGetByIdempotencyKey[DB any, P ~struct{ Tenant, Method, IdempotencyKey string }, R any](h Handle[DB], q interface {
	JobGetByIdempotencyKey(context.Context, DB, P) (R, error)
}) func(context.Context, *store.JobGetByIdempotencyKeyParams) (R, error) {
	return func(ctx context.Context, params *store.JobGetByIdempotencyKeyParams) (R, error) {
		row, err := q.JobGetByIdempotencyKey(ctx, h.DB, P{Tenant: params.Tenant, Method: params.Method, IdempotencyKey: params.IdempotencyKey})
		return One(row, err, h.Interpret, Same)
	}
}

// KeyedJob is Reads.Keyed over get (JobGetByIdempotencyKey): the key's
// fingerprint, and the job of its row mapped by job.
func KeyedJob[R ~struct {
	Fingerprint string
	Job         J
}, J any](get func(context.Context, *store.JobGetByIdempotencyKeyParams) (R, error),
	job func(J) (*store.Job, error)) func(context.Context, *store.JobGetByIdempotencyKeyParams) (string, *store.Job, error) {
	return func(ctx context.Context, params *store.JobGetByIdempotencyKeyParams) (string, *store.Job, error) {
		row, err := get(ctx, params)
		if err != nil {
			return "", nil, err
		}
		keyed := struct {
			Fingerprint string
			Job         J
		}(row)
		j, err := job(keyed.Job)
		if err != nil {
			return "", nil, err
		}
		return keyed.Fingerprint, j, nil
	}
}

// RunGetByID is Reads.Run over a store's RunGetByID query: its row mapped
// by run, or by withProgress with the run's progress (rows newer than
// recentSince counted as finished recently).
func RunGetByID[DB any, P ~struct{ Tenant, ID string }, R any](h Handle[DB], q interface {
	RunGetByID(context.Context, DB, P) (R, error)
}, run func(R) (*store.Run, error), withProgress func(ctx context.Context, row R, recentSince time.Time) (*store.Run, error),
) func(context.Context, *store.RunGetParams, string) (*store.Run, error) {
	return func(ctx context.Context, params *store.RunGetParams, id string) (*store.Run, error) {
		row, err := q.RunGetByID(ctx, h.DB, P{Tenant: params.Tenant, ID: id})
		if err != nil {
			return nil, h.Interpret(err)
		}
		if params.WithoutProgress {
			return run(row)
		}
		return withProgress(ctx, row, params.RecentSince)
	}
}

// APIKeyGetByID is Reads.APIKey over a store's APIKeyGetByID query, its
// row mapped by f.
func APIKeyGetByID[DB, R any](h Handle[DB], q interface {
	APIKeyGetByID(ctx context.Context, db DB, id string) (R, error)
}, f func(R) *store.APIKey) func(context.Context, string) (*store.APIKey, error) {
	return func(ctx context.Context, id string) (*store.APIKey, error) {
		row, err := q.APIKeyGetByID(ctx, h.DB, id)
		return One(row, err, h.Interpret, f)
	}
}

// APIKeyList is Reads.APIKeys over a store's APIKeyList query, its rows
// mapped by f.
func APIKeyList[DB any, P ~struct {
	Tenant         string
	IncludeRevoked bool
	Max            int64
}, R any](h Handle[DB], q interface {
	APIKeyList(context.Context, DB, P) ([]R, error)
}, f func(R) *store.APIKey) func(context.Context, *store.APIKeyListParams) ([]*store.APIKey, error) {
	return func(ctx context.Context, params *store.APIKeyListParams) ([]*store.APIKey, error) {
		rows, err := q.APIKeyList(ctx, h.DB, P{Tenant: params.Tenant, IncludeRevoked: params.IncludeRevoked, Max: int64(params.PageLimit())})
		return Map(rows, err, h.Interpret, f)
	}
}

// EventRows is a store's JobEventList query on db, its rows mapped: the
// events of job jobID after params.AfterSeq, a page of them.
type EventRows[DB any] func(ctx context.Context, db DB, params *store.JobEventListParams, jobID string) ([]*store.JobEvent, error)

// JobEventRows is EventRows over a store's JobEventList query, its rows
// mapped by f.
func JobEventRows[DB any, P ~struct {
	Tenant   string
	JobID    string
	AfterSeq int64
	Max      int64
}, R any](q interface {
	JobEventList(context.Context, DB, P) ([]R, error)
}, f func(R) *store.JobEvent) EventRows[DB] {
	return func(ctx context.Context, db DB, params *store.JobEventListParams, jobID string) ([]*store.JobEvent, error) {
		rows, err := q.JobEventList(ctx, db, P{Tenant: params.Tenant, JobID: jobID, AfterSeq: int64(params.AfterSeq), Max: int64(params.PageLimit())})
		return Map(rows, err, Same, f)
	}
}

// Exists is a store's JobExists query on db: whether tenant has job id.
type Exists[DB any] func(ctx context.Context, db DB, tenant, id string) (bool, error)

// JobExists is Exists over a store's JobExists query.
func JobExists[DB any, P ~struct{ Tenant, ID string }](q interface {
	JobExists(context.Context, DB, P) (bool, error)
}) Exists[DB] {
	return func(ctx context.Context, db DB, tenant, id string) (bool, error) {
		return q.JobExists(ctx, db, P{Tenant: tenant, ID: id})
	}
}

// JobEvents is Reads.Events over a store's two queries, run in one
// h.Snapshot: the page of events, and when it is empty whether the job
// exists, to tell "no new events" from "no such job"
// (store.JobEventListPage).
func JobEvents[DB any](h Handle[DB], events EventRows[DB], exists Exists[DB]) func(context.Context, *store.JobEventListParams, string) ([]*store.JobEvent, error) {
	return func(ctx context.Context, params *store.JobEventListParams, jobID string) ([]*store.JobEvent, error) {
		var page []*store.JobEvent
		err := h.snapshot(ctx, func(db DB) error {
			list, err := events(ctx, db, params, jobID)
			if err != nil {
				return h.Interpret(err)
			}
			page, err = store.JobEventListPage(list, func() (bool, error) {
				ok, err := exists(ctx, db, params.Tenant, jobID)
				return One(ok, err, h.Interpret, Same)
			})
			return err
		})
		return page, err
	}
}

// SinkStateList is Reads.SinkStates over a store's SinkStateList query,
// its rows mapped by f.
func SinkStateList[DB, R any](h Handle[DB], q interface {
	SinkStateList(ctx context.Context, db DB, tenant string) ([]R, error)
}, f func(R) *store.SinkState) func(context.Context, string) ([]*store.SinkState, error) {
	return func(ctx context.Context, tenant string) ([]*store.SinkState, error) {
		rows, err := q.SinkStateList(ctx, h.DB, tenant)
		return Map(rows, err, h.Interpret, f)
	}
}

// ScheduleSlotList is Reads.RecentSlots over a store's ScheduleSlotList
// query, its rows mapped by f.
func ScheduleSlotList[DB any, P ~struct {
	ScheduleID string
	Max        int64
}, R any](h Handle[DB], q interface {
	ScheduleSlotList(context.Context, DB, P) ([]R, error)
}, f func(R) *store.ScheduleSlot) func(context.Context, string) ([]*store.ScheduleSlot, error) {
	return func(ctx context.Context, scheduleID string) ([]*store.ScheduleSlot, error) {
		rows, err := q.ScheduleSlotList(ctx, h.DB, P{ScheduleID: scheduleID, Max: store.ScheduleRecentSlots})
		return Map(rows, err, h.Interpret, f)
	}
}

// WithSlots is the mapping of a store's schedules rows read under ctx:
// each row mapped by f, with its recent slots (slots: Reads.RecentSlots).
func WithSlots[R any](ctx context.Context, f func(R) *store.Schedule,
	slots func(context.Context, string) ([]*store.ScheduleSlot, error)) func(R) (*store.Schedule, error) {
	return func(row R) (*store.Schedule, error) {
		sch := f(row)
		recent, err := slots(ctx, sch.ID)
		if err != nil {
			return nil, err
		}
		sch.RecentSlots = append(sch.RecentSlots, recent...) // none: nil, as before any slot
		return sch, nil
	}
}
