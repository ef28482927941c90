package storepg

import "github.com/oncejob/oncejob/testsignal"

// TestSignals are the moments of a store a test can wait for (see package
// testsignal). Each is off until the test calls its Init, before the code
// that signals starts.
type TestSignals struct {
	// Listening: a notification source's connection has LISTENed (at the
	// start and after each reconnect); from then on it hears every NOTIFY.
	Listening testsignal.Signal[struct{}]
	// PlansChecked: the plan gate read the tables' statistics; the value is
	// whether the engine's statements may keep generic plans now
	// (plan_cache.go).
	PlansChecked testsignal.Signal[bool]
	// CheckpointBatch: a CheckpointWriteBatch of two writes or more ended;
	// the value is how many its pipeline committed together, or minus how
	// many it then wrote one by one (engine_batch.go).
	CheckpointBatch testsignal.Signal[int]
	// KeyPlansChecked: submitting's plan gate read the statistics of
	// jobs and idempotency_keys; the value is whether the key read and
	// JobSubmitMany may keep generic plans now.
	KeyPlansChecked testsignal.Signal[bool]
}

// TestSignals returns the store's test signals.
func (s *Store) TestSignals() *TestSignals { return &s.signals }
