package llmsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Faults are the failures the simulator injects. They are count based, so a
// run is reproducible: each fault has a Trigger that watches the calls that
// reach it and fires on a fixed schedule. A call meets the faults in the
// order of the fields below and stops at the first that fires: with
// {"rate_limit":{"count":1},"unavailable":{"count":2}} the first call gets
// 429, the next two 503 and the fourth its completion.
//
// As JSON (POST /oncejob/faults), durations are strings such as "250ms":
//
//	{"rate_limit": {"every": 3, "retry_after": "1s"},
//	 "unavailable": {"count": 2, "status": 502},
//	 "latency": "200ms",
//	 "hang": {"count": 1, "key_pattern": "^job-42:"},
//	 "bill_then_timeout": {"count": 1, "delay": "2s"}}
type Faults struct {
	// RateLimit answers 429 with Retry-After, billing nothing.
	RateLimit *RateLimit `json:"rate_limit,omitempty"`
	// Unavailable answers 503 (or Status), billing nothing.
	Unavailable *Unavailable `json:"unavailable,omitempty"`
	// Hang holds the call without an answer until the client goes away (or
	// the simulator closes), billing nothing and storing nothing.
	Hang *Trigger `json:"hang,omitempty"`
	// Latency delays every call that passed the faults above before it is
	// computed.
	Latency Duration `json:"latency,omitempty"`
	// BillThenTimeout computes the call, bills it and stores it under its
	// key — so Lookup and a retry with the key find it — and then holds the
	// answer back. It sees only calls that are computed, not answers
	// replayed from the store.
	BillThenTimeout *BillThenTimeout `json:"bill_then_timeout,omitempty"`

	// The batch faults. Their triggers see batches by input file id and
	// lines by custom_id.

	// BatchCreateLost creates the batch and then drops the connection
	// without an answer: the client cannot tell whether it was created.
	BatchCreateLost *Trigger `json:"batch_create_lost,omitempty"`
	// BatchLineFail makes a batch line fail with a 500 in the error file,
	// billing nothing; {"every": 10} fails a tenth of the lines.
	BatchLineFail *Trigger `json:"batch_line_fail,omitempty"`
	// BatchExpire makes a batch expire at the end of its delay.
	BatchExpire *BatchExpire `json:"batch_expire,omitempty"`
}

// BatchExpire is the expired-window fault.
type BatchExpire struct {
	Trigger
	// Completed is the fraction of the batch's lines, from its first, that
	// finished and were billed before it expired, 0-1; the others are in
	// its error file with code "batch_expired".
	Completed float64 `json:"completed,omitempty"`
}

// Trigger decides which calls a fault hits. The zero Trigger fires on every
// call.
type Trigger struct {
	// Every fires on every Every-th call the trigger sees; default 1.
	Every int `json:"every,omitempty"`
	// Count stops the trigger after it fired Count times; 0 never stops it.
	Count int `json:"count,omitempty"`
	// KeyPattern, a Go regexp, limits the trigger to calls whose
	// Idempotency-Key matches; other calls are not seen at all. Empty
	// matches every call.
	KeyPattern string `json:"key_pattern,omitempty"`
}

// RateLimit is the 429 fault.
type RateLimit struct {
	Trigger
	// RetryAfter is sent as Retry-After (whole seconds, rounded up) and
	// retry-after-ms; zero sends neither.
	RetryAfter Duration `json:"retry_after,omitempty"`
	// For, when set, makes the fault answer 429 to every call it sees for
	// this long from when the faults were armed (a provider refusing
	// everything for a while); Every and Count are then ignored.
	For Duration `json:"for,omitempty"`
}

// Unavailable is the 5xx fault.
type Unavailable struct {
	Trigger
	// Status is the HTTP status to answer, 400-599; default 503.
	Status int `json:"status,omitempty"`
}

// BillThenTimeout is the "finished and billed, but the client timed out"
// fault.
type BillThenTimeout struct {
	Trigger
	// Delay holds the answer this long, so a client with a shorter timeout
	// gives up. Zero holds it until the client goes away.
	Delay Duration `json:"delay,omitempty"`
}

// Duration is a time.Duration written in JSON as a string like "1.5s".
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string such as "250ms".
func (d *Duration) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"1s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// armedFaults is Faults with each trigger's progress; guarded by Server.mu.
type armedFaults struct {
	cfg             Faults
	armedAt         time.Time
	rateLimit       *armed
	unavailable     *armed
	hang            *armed
	billThenTimeout *armed
	batchCreateLost *armed
	batchLineFail   *armed
	batchExpire     *armed
}

type armed struct {
	Trigger
	re    *regexp.Regexp
	seen  int
	fired int
}

func arm(f Faults, now time.Time) (armedFaults, error) {
	var errs []error
	a := armedFaults{cfg: f, armedAt: now}
	arm1 := func(name string, t *Trigger) *armed {
		if t == nil {
			return nil
		}
		if t.Every < 0 || t.Count < 0 {
			errs = append(errs, fmt.Errorf("%s: every and count must not be negative", name))
		}
		x := &armed{Trigger: *t}
		if t.KeyPattern != "" {
			re, err := regexp.Compile(t.KeyPattern)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: key_pattern: %w", name, err))
			}
			x.re = re
		}
		return x
	}
	if f.RateLimit != nil {
		a.rateLimit = arm1("rate_limit", &f.RateLimit.Trigger)
		if f.RateLimit.RetryAfter < 0 || f.RateLimit.For < 0 {
			errs = append(errs, errors.New("rate_limit: retry_after and for must not be negative"))
		}
	}
	if f.Unavailable != nil {
		a.unavailable = arm1("unavailable", &f.Unavailable.Trigger)
		if s := f.Unavailable.Status; s != 0 && (s < 400 || s > 599) {
			errs = append(errs, errors.New("unavailable: status must be 400-599"))
		}
	}
	a.hang = arm1("hang", f.Hang)
	if f.Latency < 0 {
		errs = append(errs, errors.New("latency must not be negative"))
	}
	if f.BillThenTimeout != nil {
		a.billThenTimeout = arm1("bill_then_timeout", &f.BillThenTimeout.Trigger)
		if f.BillThenTimeout.Delay < 0 {
			errs = append(errs, errors.New("bill_then_timeout: delay must not be negative"))
		}
	}
	a.batchCreateLost = arm1("batch_create_lost", f.BatchCreateLost)
	a.batchLineFail = arm1("batch_line_fail", f.BatchLineFail)
	if f.BatchExpire != nil {
		a.batchExpire = arm1("batch_expire", &f.BatchExpire.Trigger)
		if c := f.BatchExpire.Completed; c < 0 || c > 1 {
			errs = append(errs, errors.New("batch_expire: completed must be 0-1"))
		}
	}
	return a, errors.Join(errs...)
}

// fire reports whether the trigger hits this call, counting it as seen.
func (a *armed) fire(key string) bool {
	if a == nil || (a.re != nil && !a.re.MatchString(key)) {
		return false
	}
	a.seen++
	if a.seen%max(a.Every, 1) != 0 || (a.Count > 0 && a.fired >= a.Count) {
		return false
	}
	a.fired++
	return true
}
