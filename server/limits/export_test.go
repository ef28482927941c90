package limits

import "time"

// SetNow gives l a clock of the test's.
func SetNow(l *Limits, now func() time.Time) { l.now = now }
