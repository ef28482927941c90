package worker

import (
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/testsignal"
)

// TestSignals are the moments of a worker a test can wait for (see package
// testsignal). Each is off until the test calls its Init, before Run.
type TestSignals struct {
	// Claimed: a claim returned jobs; the value is their ids.
	Claimed testsignal.Signal[[]string]
	// Heartbeat: a heartbeat of a running job returned.
	Heartbeat testsignal.Signal[HeartbeatSignal]
	// Settled: an attempt wrote the status it decided (settle's
	// transition; not a publish).
	Settled testsignal.Signal[SettledSignal]
	// BatchJobsRead: the follower of a provider batch read the jobs of its
	// lines (store.ProviderBatchJobs) to decide whether to cancel it.
	BatchJobsRead testsignal.Signal[BatchJobsReadSignal]
	// BatchCancelled: the follower of a provider batch asked the provider
	// to cancel it; the value is the batch's tag.
	BatchCancelled testsignal.Signal[string]
}

// BatchJobsReadSignal is what one read of a batch's jobs decided.
type BatchJobsReadSignal struct {
	Tag string
	// Jobs is how many jobs the read returned; AllCancelled whether each
	// was cancelled (in the store, or it left the batch here cancelled).
	Jobs         int
	AllCancelled bool
	Err          error
}

// SettledSignal is the status an attempt of a job settled in.
type SettledSignal struct {
	JobID  string
	Status store.JobStatus
}

// HeartbeatSignal is what one heartbeat learnt.
type HeartbeatSignal struct {
	JobID           string
	CancelRequested bool
	Err             error // ErrLeaseLost, or the store's error
}

// TestSignals returns the worker's test signals.
func (w *Worker) TestSignals() *TestSignals { return &w.signals }
