package store

// Page limits. A zero (or negative) Limit takes the method's default; any
// Limit is capped so that Limit+1, the probe row that tells whether a next
// page exists, still fits an int32 query parameter.
const (
	JobListLimitDefault       = 100
	JobEventListLimitDefault  = 1000
	JobChangeListLimitDefault = 500
	// PageBytesDefault is the default MaxBytes of the reads bounded in
	// bytes (JobChangeList, JobList): past their first row, the rows a
	// read returns hold no more than this (their large columns as text).
	PageBytesDefault = 1 << 20
	// JobListBytesDefault is JobList's default MaxBytes: a page well under
	// the 4 MiB a gRPC client receives by default, once encoded.
	JobListBytesDefault                     = 2 << 20
	IdempotencyKeyDeleteExpiredLimitDefault = 1000

	maxPageLimit = 1<<31 - 2
)

func pageLimit(limit, def int) int {
	if limit <= 0 {
		return def
	}
	return min(limit, maxPageLimit)
}

// PageLimit is the page size JobList returns at most.
func (p *JobListParams) PageLimit() int { return pageLimit(p.Limit, JobListLimitDefault) }

// PageLimit is the number of events JobEventList returns at most.
func (p *JobEventListParams) PageLimit() int { return pageLimit(p.Limit, JobEventListLimitDefault) }

// JobEventListPage is JobEventList's answer from the events read: an empty
// page is ErrNotFound when the job does not exist (exists, asked then
// alone, in the read of the page), else the events, none past the last.
func JobEventListPage(events []*JobEvent, exists func() (bool, error)) ([]*JobEvent, error) {
	if len(events) > 0 {
		return events, nil
	}
	ok, err := exists()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrNotFound
	}
	return events, nil
}

// PageLimit is the number of changes JobChangeList returns at most.
func (p *JobChangeListParams) PageLimit() int { return pageLimit(p.Limit, JobChangeListLimitDefault) }

// PageBytes is the byte bound of a JobChangeList read (see MaxBytes).
func (p *JobChangeListParams) PageBytes() int64 { return pageBytes(p.MaxBytes) }

func pageBytes(n int64) int64 {
	if n <= 0 {
		return PageBytesDefault
	}
	return n
}

// PageLimit is the number of keys one sweep frees at most.
func (p *IdempotencyKeyDeleteExpiredParams) PageLimit() int {
	return pageLimit(p.Limit, IdempotencyKeyDeleteExpiredLimitDefault)
}

// pageOf splits a read of up to limit+1 items in the list's order: the
// first limit are the page, and only when an item beyond them was read is
// there a next page, starting after last, the page's last item.
func pageOf[T any](items []T, limit int) (page []T, last T, more bool) {
	if len(items) <= limit {
		return items, last, false
	}
	return items[:limit], items[limit-1], true
}

// PageBytes is the byte bound of a JobList page (see MaxBytes).
func (p *JobListParams) PageBytes() int64 {
	if p.MaxBytes <= 0 {
		return JobListBytesDefault
	}
	return p.MaxBytes
}

// SizedJob is a job read with its size as JobListParams.MaxBytes counts it.
type SizedJob struct {
	Job   *Job
	Bytes int64
}

// JobListPageSized is JobList's answer from up to limit+1 jobs read, each
// with its size, of which the store returned those that start within
// maxBytes and the one after them: the page is the first jobs within limit
// and maxBytes (at least one), and there is a next page when a job read was
// left out.
func JobListPageSized(jobs []SizedJob, limit int, maxBytes int64) *JobListResult {
	res := &JobListResult{Jobs: make([]*Job, 0, min(len(jobs), limit))}
	for _, j := range jobs {
		if len(res.Jobs) == limit || (len(res.Jobs) > 0 && res.Bytes+j.Bytes > maxBytes) {
			break
		}
		res.Jobs = append(res.Jobs, j.Job)
		res.Bytes += j.Bytes
	}
	if len(res.Jobs) < len(jobs) {
		last := res.Jobs[len(res.Jobs)-1]
		res.Next = &JobCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return res
}

// JobListPage makes the result of a JobList read of up to limit+1 jobs,
// newest first: the first limit are the page, and only when a job beyond
// them was read is there a next page, starting after the page's last job.
func JobListPage(jobs []*Job, limit int) *JobListResult {
	page, last, more := pageOf(jobs, limit)
	res := &JobListResult{Jobs: page}
	if more {
		res.Next = &JobCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return res
}
