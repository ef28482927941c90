package store

import (
	"context"
	"log/slog"
	"time"
)

// WatchStore is what watching needs of a store: the per-job event log
// (JobEventList, as in Store), the tenant-wide change log and a source of
// notifications.
type WatchStore interface {
	// JobEventList is Store.JobEventList. Events of one job become visible
	// in seq order with no gaps: a transition holds the job's row lock while
	// it appends seq n, so seq n+1 cannot commit before it.
	JobEventList(ctx context.Context, params *JobEventListParams) ([]*JobEvent, error)

	// JobChangeList returns the tenant's events after params.After in the
	// global change order, each with its job, oldest first. It only returns
	// events that no transaction still running can precede: an event
	// committed later always sorts after every cursor handed out before, so
	// resuming from the last cursor a caller saw misses nothing and repeats
	// nothing. The price is latency: while any write transaction on the
	// database server is open (in any database: transaction ids are
	// cluster-wide), events after its start wait for it to end. So an event
	// just committed may not be listed yet; callers wait for it (the
	// notification source notifies it once it is listable).
	JobChangeList(ctx context.Context, params *JobChangeListParams) ([]*JobChange, error)

	// JobEventListen starts the store's notification source and returns its
	// channel; the channel is closed after ctx is done. For every event
	// committed after the call it sends at least one notification carrying
	// the event's tenant, job and seq — soon (Postgres: NOTIFY) and, should
	// that be lost (a dropped connection), within about PollInterval (a tail
	// of the log). Duplicates happen; a notification is a hint to re-read
	// the log, never the data. A caller must keep receiving: the source
	// blocks while the channel's buffer is full.
	JobEventListen(ctx context.Context, params *JobEventListenParams) (<-chan JobEventNotification, error)
}

// JobEventNotification says that a job has an event with this seq.
type JobEventNotification struct {
	Tenant string
	JobID  string
	Seq    int32
}

// JobEventListenParams configures a notification source.
type JobEventListenParams struct {
	// Logger receives reconnects and errors; default slog.Default().
	Logger *slog.Logger
	// PollInterval is how often the log is tailed for events whose
	// notification was lost; default 1s.
	PollInterval time.Duration
	// Buffer is the channel's capacity; default 1024.
	Buffer int
}

// JobChangeCursor is a position in the global change order of events. The
// zero cursor is before the first event.
type JobChangeCursor struct {
	Tx int64 // the writing transaction
	ID int64 // insert order within it
}

// Less reports whether c sorts before o.
func (c JobChangeCursor) Less(o JobChangeCursor) bool {
	return c.Tx < o.Tx || (c.Tx == o.Tx && c.ID < o.ID)
}

// JobChange is one event of the tenant's change log with the job it moved.
// Job is the job as it is when read, which may be ahead of Event; its
// Output is not loaded (nil): a list view does not need it, GetJob has it.
type JobChange struct {
	Cursor JobChangeCursor
	Event  *JobEvent
	Job    *Job
	// Bytes is the change's size as the store bounds a read by
	// (JobChangeListParams.MaxBytes), which the memory budget counts it by.
	Bytes int64
}

// JobChangesFull reports whether a read of changes with params stopped at
// one of its bounds, so that more may follow at once: it returned Limit
// changes, or changes of MaxBytes or more.
func JobChangesFull(changes []*JobChange, params *JobChangeListParams) bool {
	if len(changes) >= params.PageLimit() {
		return true
	}
	var n int64
	for _, c := range changes {
		n += c.Bytes
	}
	return n >= params.PageBytes()
}

// NewJobChange is the change of event at cursor with job, the job it moved,
// as JobChangeList answers it: the job's Output dropped (see JobChange),
// bytes its size as the store measured it.
func NewJobChange(cursor JobChangeCursor, event *JobEvent, job *Job, bytes int64) *JobChange {
	job.Output = nil
	return &JobChange{Cursor: cursor, Event: event, Job: job, Bytes: bytes}
}

// JobChangeListParams selects the tenant's changes after a cursor.
type JobChangeListParams struct {
	Tenant string
	// Status, when set, keeps only events that moved a job to this status.
	Status JobStatus
	// Pipeline, when set, keeps only events of jobs of this pipeline.
	Pipeline string
	After    JobChangeCursor
	// Limit caps the changes returned; 0 means 500.
	Limit int
	// MaxBytes caps the bytes of the changes returned past the first (the
	// job's params, labels, output and error and the event's message as
	// text, plus 256 a change: JobChange.Bytes); 0 means PageBytesDefault.
	// A read that stops at it may return fewer than Limit changes although
	// more follow: JobChangesFull tells.
	MaxBytes int64
}
