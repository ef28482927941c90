package relay

import "github.com/oncejob/oncejob/testsignal"

// TestSignals are the moments of a relay a test can wait for (see package
// testsignal). Each is off until the test calls its Init, before Run.
type TestSignals struct {
	// Round: a round ended and Health was updated; the value is what
	// Health reports from then on (nil after a round that worked).
	Round testsignal.Signal[error]
}

// TestSignals returns the relay's test signals.
func (r *Relay) TestSignals() *TestSignals { return &r.signals }
