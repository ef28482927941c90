package limits

import "github.com/oncejob/oncejob/testsignal"

// TestSignals are the moments of the limits a test can wait for (see
// package testsignal). Each is off until the test calls its Init, before
// the calls it waits on start.
type TestSignals struct {
	// StoreSlot: a call took one of its tenant's store slots; the value is
	// the tenant.
	StoreSlot testsignal.Signal[string]
	// StoreSlotWait: a call found its tenant's store slots taken and
	// waits; the value is the tenant.
	StoreSlotWait testsignal.Signal[string]
}

// TestSignals returns the limits' test signals.
func (l *Limits) TestSignals() *TestSignals { return &l.signals }
