package telemetry

import "time"

// SetStatsNow gives c a clock of the test's.
func SetStatsNow(c *StatsCollector, now func() time.Time) { c.now = now }
