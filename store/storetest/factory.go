package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// allStatuses is every status a job can have, for tests that must hold in
// each.
var allStatuses = []store.JobStatus{
	store.JobStatusQueued,
	store.JobStatusRunning,
	store.JobStatusRetryWait,
	store.JobStatusAwaitingApproval,
	store.JobStatusOutcomeUnknown,
	store.JobStatusSucceeded,
	store.JobStatusFailed,
	store.JobStatusCancelled,
	store.JobStatusDeadLettered,
}

// factoryLeaseOwner holds the lease of a running job the factory made.
const factoryLeaseOwner = "w"

// jobIn is the state factory: it submits a job and puts it straight into
// status, with what a job has there — a lease (owner factoryLeaseOwner,
// attempt 1, an hour long) when running; attempt 1 once it has run; a due
// time an hour away in retry_wait; a plan in awaiting_approval; an output
// and stage published when succeeded; an error and finished_at when
// failed, dead-lettered or cancelled. Its events stay consecutive: the
// factory appends one. Unlike driving the engine there, it needs no claim,
// so other jobs of the store do not get in its way.
func jobIn(t *testing.T, s Store, status store.JobStatus) *store.Job {
	t.Helper()
	return submittedJobIn(t, s, newSubmitParams(t), status)
}

// submittedJobIn is jobIn for the job sub creates.
func submittedJobIn(t *testing.T, s Store, sub *store.JobSubmitParams, status store.JobStatus) *store.Job {
	t.Helper()
	job := submit(t, s, sub)
	if status == store.JobStatusQueued {
		return job
	}
	now := time.Now()
	params := &store.JobUpdateFullParams{
		Tenant:  job.Tenant,
		ID:      job.ID,
		Status:  status,
		Stage:   store.JobStageTextExtracted,
		Attempt: 1,
		Message: "factory: " + string(status),
	}
	switch status {
	case store.JobStatusRunning:
		params.LeaseOwner, params.LeaseUntil = factoryLeaseOwner, new(now.Add(time.Hour))
	case store.JobStatusRetryWait:
		params.RunAfter = new(now.Add(time.Hour))
	case store.JobStatusAwaitingApproval:
		params.Stage, params.Output = store.JobStageValidated, []byte(`{"plan": "pay 42"}`)
	case store.JobStatusSucceeded:
		params.Stage, params.Output, params.FinishedAt = store.JobStagePublished, []byte(`{"total": 42}`), &now
	case store.JobStatusFailed, store.JobStatusDeadLettered, store.JobStatusCancelled:
		params.Error = &store.JobError{Code: "unavailable", Message: "503 from provider", Retryable: true}
		params.FinishedAt = &now
	}
	moved, err := s.JobUpdateFull(t.Context(), params)
	require.NoError(t, err)
	require.Equal(t, status, moved.Status)
	return moved
}
