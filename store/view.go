package store

import "context"

// ViewStore is what list views need beyond Store: how many jobs are in
// each status, and where the change log ends, so a list read now and a
// watch started from that end together miss no change.
type ViewStore interface {
	// JobCountByStatus counts the tenant's jobs per status (optionally of
	// one pipeline). Statuses with no job are absent.
	JobCountByStatus(ctx context.Context, params *JobCountByStatusParams) (map[JobStatus]int64, error)

	// JobChangeHead returns a cursor such that every event that becomes
	// readable by WatchStore.JobChangeList after this call sorts after it.
	// Taken before a read of jobs, it is where a watch of the changes that
	// read did not see starts: nothing is missed, and events the read
	// already reflects may be sent again.
	JobChangeHead(ctx context.Context, params *JobChangeHeadParams) (JobChangeCursor, error)
}

type JobCountByStatusParams struct {
	Tenant   string
	Pipeline string // empty: any
}

// JobChangeHeadParams is empty: the head is global. It exists so a field
// can be added without breaking callers.
type JobChangeHeadParams struct{}
