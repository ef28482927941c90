package rundefaults

import (
	"context"

	"github.com/oncejob/oncejob/store"
)

// A page of jobs bounded by bytes (JobList, JobChangeList) is read with the
// sizes of the rows, which hold a run's item's own params and labels only:
// each job's size grows by its run's defaults before the page is cut, as if
// its row held them, and only the jobs the page keeps get them.

// ListPage is store.JobListPageSized over jobs read with their rows' sizes.
func ListPage(ctx context.Context, c *Cache, jobs []store.SizedJob, limit int, maxBytes int64) (*store.JobListResult, error) {
	read := make([]*store.Job, len(jobs))
	for i, j := range jobs {
		read[i] = j.Job
	}
	found, err := c.Of(ctx, read...)
	if err != nil {
		return nil, err
	}
	for i := range jobs {
		jobs[i].Bytes += found.Bytes(jobs[i].Job)
	}
	res := store.JobListPageSized(jobs, limit, maxBytes)
	return res, c.MergeFound(found, res.Jobs...)
}

// Changes is the first of changes, read with their rows' sizes, that a
// read bounded by maxBytes returns (JobChangeListParams.MaxBytes: the
// first, and each that starts within maxBytes), their jobs with their runs'
// defaults.
func Changes(ctx context.Context, c *Cache, changes []*store.JobChange, maxBytes int64) ([]*store.JobChange, error) {
	read := make([]*store.Job, len(changes))
	for i, ch := range changes {
		read[i] = ch.Job
	}
	found, err := c.Of(ctx, read...)
	if err != nil {
		return nil, err
	}
	var start int64
	for i, ch := range changes {
		if i > 0 && start >= maxBytes {
			changes = changes[:i]
			break
		}
		ch.Bytes += found.Bytes(ch.Job)
		start += ch.Bytes
	}
	for _, ch := range changes {
		if err := c.MergeFound(found, ch.Job); err != nil {
			return nil, err
		}
	}
	return changes, nil
}
