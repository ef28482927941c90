package store

import (
	"context"
	"time"
)

// ScheduleStore keeps schedules and decides their slots (docs/architecture.md,
// "Schedules"). Every method is scoped by tenant, except the scheduler's
// ScheduleClaim and ScheduleDecide, which work across tenants under a
// lease.
type ScheduleStore interface {
	// ScheduleCreate creates a schedule, or returns the one its key
	// created (Existing) when the fingerprint matches; another
	// fingerprint is ErrIdempotencyKeyReused.
	ScheduleCreate(ctx context.Context, params *ScheduleCreateParams) (*ScheduleCreateResult, error)

	// ScheduleGet returns a live (not deleted) schedule with its latest
	// slots, or ErrNotFound.
	ScheduleGet(ctx context.Context, params *ScheduleGetParams) (*Schedule, error)

	// ScheduleList returns one page of the tenant's live schedules, newest
	// first, each with its latest slots.
	ScheduleList(ctx context.Context, params *ScheduleListParams) (*ScheduleListResult, error)

	// ScheduleSetPaused pauses or resumes a live schedule. Resuming a
	// paused one sets its next slot to params.NextSlotAt; pausing drops a
	// buffered slot. Either on a schedule already so returns it unchanged.
	ScheduleSetPaused(ctx context.Context, params *ScheduleSetPausedParams) (*Schedule, error)

	// ScheduleDelete deletes a live schedule (it never fires again; its
	// jobs and slots stay), or returns ErrNotFound.
	ScheduleDelete(ctx context.Context, params *ScheduleGetParams) error

	// ScheduleClaim takes, for params.Owner until params.LeaseUntil, the
	// lease of up to Limit live, unpaused schedules that have a slot due
	// (next slot at or before Now, or a buffered slot) and whose lease is
	// free, expired or Owner's own, and returns them.
	ScheduleClaim(ctx context.Context, params *ScheduleClaimParams) ([]*Schedule, error)

	// ScheduleDecide decides one slot of a schedule whose lease params.Owner
	// holds, in one transaction: it records the slot once (a slot already
	// recorded is left as it is: Decided false), submits its job when it
	// fires (with the slot's key, as JobSubmit would), and moves the
	// schedule on to params.Next. The decision is DecideSlot's, on the
	// status of the schedule's last job read under the schedule's lock. A
	// lease another owner holds, or a schedule paused or deleted meanwhile,
	// is ErrLeaseLost, with nothing written.
	ScheduleDecide(ctx context.Context, params *ScheduleDecideParams) (*ScheduleDecideResult, error)
}

// OverlapPolicy is what a slot does while the schedule's last job runs.
type OverlapPolicy string

const (
	OverlapSkip      OverlapPolicy = "skip"
	OverlapBufferOne OverlapPolicy = "buffer_one"
	OverlapAllow     OverlapPolicy = "allow"
)

// CatchupPolicy is what happens to slots found later than the misfire
// threshold.
type CatchupPolicy string

const (
	CatchupNone   CatchupPolicy = "none"
	CatchupLatest CatchupPolicy = "latest"
)

// SlotOutcome is what became of a slot.
type SlotOutcome string

const (
	SlotFired    SlotOutcome = "fired"
	SlotSkipped  SlotOutcome = "skipped"
	SlotBuffered SlotOutcome = "buffered"
	SlotMissed   SlotOutcome = "missed"
)

// Schedule submits a job template at the slots of a cron expression or an
// interval.
type Schedule struct {
	ID             string
	Tenant         string
	IdempotencyKey string
	Fingerprint    string
	Name           string
	Cron           string        // or Interval
	Interval       time.Duration // or Cron
	TimeZone       string
	Job            []byte // the job template: a SubmitJobRequest as protojson
	Overlap        OverlapPolicy
	Catchup        CatchupPolicy
	Misfire        time.Duration
	Paused         bool
	NextSlotAt     time.Time
	LastJobID      string
	BufferedSlotAt *time.Time
	LeaseOwner     string
	LeaseUntil     *time.Time
	CreatedAt      time.Time
	// RecentSlots are the latest decided slots, newest first (Get, List).
	RecentSlots []*ScheduleSlot
}

// ScheduleSlot is one decided slot.
type ScheduleSlot struct {
	SlotAt    time.Time
	Outcome   SlotOutcome
	JobID     string
	Reason    string
	DecidedAt time.Time
}

// ScheduleCreateParams is the input of ScheduleCreate; Schedule's fields,
// chosen by the caller (ID, Fingerprint, the first NextSlotAt).
type ScheduleCreateParams struct {
	Schedule
}

// ScheduleCreateResult is the schedule and whether its key had made it.
type ScheduleCreateResult struct {
	Schedule *Schedule
	Existing bool
}

// ScheduleGetParams names a schedule.
type ScheduleGetParams struct {
	Tenant string
	ID     string
}

// ScheduleListParams selects a page of schedules.
type ScheduleListParams struct {
	Tenant string
	Limit  int // 0 means 20, at most 100
	After  *JobCursor
	// Documents keeps the templates' documents; false leaves out each
	// document's text and data (its name and media type stay), so the
	// page is read without them.
	Documents bool
}

// ScheduleListResult is one page; Next is nil on the last page.
type ScheduleListResult struct {
	Schedules []*Schedule
	Next      *JobCursor
}

// ScheduleSetPausedParams pauses or resumes.
type ScheduleSetPausedParams struct {
	Tenant     string
	ID         string
	Paused     bool
	NextSlotAt time.Time // with Paused false: the first slot after now
}

// ScheduleClaimParams is the input of ScheduleClaim.
type ScheduleClaimParams struct {
	Owner      string
	Now        time.Time
	LeaseUntil time.Time
	Limit      int // 0 means 100
}

// ScheduleDecideParams decides one slot.
type ScheduleDecideParams struct {
	ScheduleID string
	Owner      string
	Slot       time.Time
	// Next is the next slot to consider after this one; with Buffered it
	// is ignored (the buffered slot was already passed).
	Next time.Time
	// Buffered decides the schedule's buffered slot (BUFFER_ONE): it
	// fires once the last job has ended, and otherwise waits.
	Buffered bool
	// Missed records Slot as missed with MissedReason, firing nothing.
	Missed       bool
	MissedReason string
	// Refused, when not empty, records Slot as skipped with this reason,
	// firing nothing: its job broke a limit or a field rule a direct
	// submit is held to. Not with Buffered.
	Refused string
	// Job is the slot's job, should it fire: its key derived from the
	// schedule and the slot, so a slot's job is created once.
	Job *JobSubmitParams
}

// ScheduleDecideResult is what became of the slot.
type ScheduleDecideResult struct {
	// Decided: this call recorded the slot (false: it had been decided
	// before, or a buffered slot still waits).
	Decided bool
	Outcome SlotOutcome
	JobID   string
	Reason  string
}

// SlotDecision is DecideSlot's answer.
type SlotDecision struct {
	Outcome SlotOutcome
	// Wait: a buffered slot whose job still runs; nothing is written.
	Wait   bool
	Reason string
	// Buffered is the schedule's buffered slot after the decision.
	Buffered *time.Time
}

// DecideSlot is the overlap policy: what a slot does given the schedule's
// last job (lastRunning: it is not terminal) and its buffered slot. With
// isBuffered the slot is the buffered one, waiting for the last job.
func DecideSlot(policy OverlapPolicy, lastJobID string, lastRunning bool, buffered *time.Time, slot time.Time, isBuffered bool) SlotDecision {
	switch {
	case isBuffered && lastRunning:
		return SlotDecision{Wait: true, Buffered: buffered}
	case isBuffered:
		return SlotDecision{Outcome: SlotFired} // the buffer is emptied
	case !lastRunning || policy == OverlapAllow:
		return SlotDecision{Outcome: SlotFired, Buffered: buffered}
	case policy == OverlapBufferOne && buffered == nil:
		return SlotDecision{Outcome: SlotBuffered, Reason: "waiting for job " + lastJobID + " to end", Buffered: &slot}
	case policy == OverlapBufferOne:
		return SlotDecision{Outcome: SlotSkipped, Reason: "overlap: job " + lastJobID + " is running and slot " + buffered.UTC().Format(time.RFC3339Nano) + " is already buffered", Buffered: buffered}
	}
	return SlotDecision{Outcome: SlotSkipped, Reason: "overlap: job " + lastJobID + " is still running", Buffered: buffered}
}

// ScheduleListPage is the page of schedules from one row more than limit,
// as JobListPage is for jobs. A store whose schedule costs a read of its
// own (its slots) reads only the page's: read is called with the rows of
// the page, at most limit of them.
func ScheduleListPage[R any](rows []R, limit int, read func(R) (*Schedule, error)) (*ScheduleListResult, error) {
	page, _, more := pageOf(rows, limit)
	res := &ScheduleListResult{Schedules: make([]*Schedule, len(page))}
	for i, row := range page {
		var err error
		if res.Schedules[i], err = read(row); err != nil {
			return nil, err
		}
	}
	if more {
		last := res.Schedules[limit-1]
		res.Next = &JobCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	return res, nil
}

// ScheduleListLimit is the page size of params: 20 by default, at most 100.
func (p *ScheduleListParams) ScheduleListLimit() int { return min(pageLimit(p.Limit, 20), 100) }

// ScheduleClaimLimit is the most schedules one claim takes.
func (p *ScheduleClaimParams) ScheduleClaimLimit() int { return pageLimit(p.Limit, 100) }

// ScheduleCreateExisting answers a ScheduleCreate whose key is bound to s.
func ScheduleCreateExisting(fingerprint string, s *Schedule) (*ScheduleCreateResult, error) {
	if s.Fingerprint != fingerprint {
		return nil, ErrIdempotencyKeyReused
	}
	return &ScheduleCreateResult{Schedule: s, Existing: true}, nil
}

// ScheduleRecentSlots is how many slots Get and List return per schedule.
const ScheduleRecentSlots = 10
