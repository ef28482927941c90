// Package schedule computes the slots of a schedule (a cron expression in a
// time zone, or an interval) and fires them: a Scheduler claims due
// schedules under a lease in the store and decides each slot there, once.
// See docs/architecture.md, "Schedules".
package schedule

import (
	"errors"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// MinInterval is the shortest interval a schedule may have.
const MinInterval = 100 * time.Millisecond

// parser reads five fields (minute hour day-of-month month day-of-week), six
// with seconds first, and descriptors (@hourly, @every 5m, ...).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Spec is when a schedule's slots are.
type Spec struct {
	cron     cron.Schedule
	loc      *time.Location
	interval time.Duration
}

// SpecError is a spec that cannot be used, naming the field at fault.
type SpecError struct {
	Field string // "cron", "time_zone" or "interval"
	Err   error
}

func (e *SpecError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *SpecError) Unwrap() error { return e.Err }

// ParseSpec returns the spec of exactly one of expr (a cron expression read
// in the IANA time zone tz, UTC when empty) or interval (slots at every
// multiple of it since the Unix epoch).
func ParseSpec(expr, tz string, interval time.Duration) (*Spec, error) {
	switch {
	case expr != "" && interval != 0:
		return nil, &SpecError{"cron", errors.New("give a cron expression or an interval, not both")}
	case interval != 0:
		if interval < MinInterval {
			return nil, &SpecError{"interval", fmt.Errorf("must be at least %s", MinInterval)}
		}
		if tz != "" {
			return nil, &SpecError{"time_zone", errors.New("applies to a cron expression only")}
		}
		return &Spec{interval: interval}, nil
	case expr == "":
		return nil, &SpecError{"cron", errors.New("give a cron expression or an interval")}
	}
	loc := time.UTC
	if tz != "" {
		var err error
		if loc, err = time.LoadLocation(tz); err != nil {
			return nil, &SpecError{"time_zone", fmt.Errorf("unknown time zone %q", tz)}
		}
	}
	sched, err := parser.Parse(expr)
	if err != nil {
		return nil, &SpecError{"cron", fmt.Errorf("cannot parse %q: %w", expr, err)}
	}
	return &Spec{cron: sched, loc: loc}, nil
}

// Next is the first slot strictly after t (the zero time when a cron
// expression has none, such as February 30th).
func (s *Spec) Next(t time.Time) time.Time {
	if s.interval > 0 {
		n := t.UnixNano()/int64(s.interval) + 1
		return time.Unix(0, n*int64(s.interval)).UTC()
	}
	// The schedule's location is Local (no CRON_TZ prefix), so cron reads
	// t in t's own location: the schedule's.
	return s.cron.Next(t.In(s.loc)).UTC()
}
