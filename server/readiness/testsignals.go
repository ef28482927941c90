package readiness

import "github.com/oncejob/oncejob/testsignal"

// TestSignals are the moments of a probe a test can wait for (see package
// testsignal). Each is off until the test calls its Init, before Run.
type TestSignals struct {
	// Checked: a check published its answer; the value is whether the
	// process is ready.
	Checked testsignal.Signal[bool]
}

// TestSignals returns the probe's test signals.
func (p *Probe) TestSignals() *TestSignals { return &p.signals }
