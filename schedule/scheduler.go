package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/jobspec"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/store"
)

// maxWalk bounds the slots one decision walks through after downtime;
// beyond it the schedule jumps to the next slot after now.
const maxWalk = 100_000

// Config is what a Scheduler needs. Zero fields take the defaults stated.
type Config struct {
	// Store keeps the schedules. Required.
	Store store.ScheduleStore
	// Pipelines are the pipelines a slot's job may name: its store params
	// are made as SubmitJob makes them (jobspec.Params). Required.
	Pipelines *pipeline.Registry
	// Owner names this scheduler in leases. Default: host, pid and a
	// random suffix.
	Owner string
	// Lease is how long a claim holds a schedule; another scheduler takes
	// it over after. Default 10s.
	Lease time.Duration
	// PollInterval is the wait between claims. Default 250ms; a slot fires
	// at most this late while its holder lives.
	PollInterval time.Duration
	// MaxDocumentBytes and ProviderBatches complete the field rules a
	// slot's job is checked by, as a direct submit is (jobspec.Rules).
	// Default 0: the document's size is not checked here (CreateSchedule
	// checked the template).
	MaxDocumentBytes int
	ProviderBatches  bool
	// Admit, when set, holds a slot's job to the tenant's limits (submit
	// rate, jobs in flight, document bytes a day) as a direct submit is
	// held: an error refuses the slot (recorded SKIPPED with the error as
	// its reason; a buffered slot waits). Default: none.
	Admit func(ctx context.Context, tenant string, jobs int, documentBytes int64) error
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Owner == "" {
		host, _ := os.Hostname()
		c.Owner = fmt.Sprintf("%s-%d-%x", host, os.Getpid(), rand.Uint32())
	}
	if c.Lease <= 0 {
		c.Lease = 10 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 250 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Scheduler fires the slots of the schedules it leases.
type Scheduler struct {
	cfg Config
}

// New returns a Scheduler.
func New(cfg Config) (*Scheduler, error) {
	cfg = cfg.WithDefaults()
	if cfg.Store == nil || cfg.Pipelines == nil {
		return nil, errors.New("schedule: Config.Store and Config.Pipelines are required")
	}
	return &Scheduler{cfg: cfg}, nil
}

// Run ticks every PollInterval until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	for {
		if err := s.Tick(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.WarnContext(ctx, "schedule: tick failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.cfg.PollInterval):
		}
	}
}

// Tick claims the due schedules and decides their slots.
func (s *Scheduler) Tick(ctx context.Context) error {
	now := s.cfg.Now()
	claimed, err := s.cfg.Store.ScheduleClaim(ctx, &store.ScheduleClaimParams{Owner: s.cfg.Owner, Now: now, LeaseUntil: now.Add(s.cfg.Lease)})
	if err != nil {
		return err
	}
	for _, sch := range claimed {
		if err := s.decide(ctx, sch, now); err != nil && !errors.Is(err, store.ErrLeaseLost) {
			s.cfg.Logger.WarnContext(ctx, "schedule: deciding a slot failed", "schedule", sch.ID, "error", err)
		}
	}
	return nil
}

// SlotKey is the idempotency key of a slot's job: a slot fires at most
// once, whatever the number of servers and restarts.
func SlotKey(scheduleID string, slot time.Time) string {
	return "schedule:" + scheduleID + ":" + slot.UTC().Format(time.RFC3339Nano)
}

// SlotMethod is the method scope of a slot's key: not SubmitJob's, nor any
// RPC's, so no caller can take a slot's key before it fires (a key is
// unique per tenant, method and value). Before, slots shared SubmitJob's
// scope, and a submitter who sent a job under the next slot's key made the
// slot record that job as fired (issue #31, finding 4).
const SlotMethod = "oncejob.schedule/Slot"

// decide decides every slot of sch due at now, in order: the buffered one,
// slots missed (later than the misfire threshold) per the catch-up policy,
// then each slot on time.
func (s *Scheduler) decide(ctx context.Context, sch *store.Schedule, now time.Time) error {
	spec, err := ParseSpec(sch.Cron, sch.TimeZone, sch.Interval)
	if err != nil {
		return err
	}
	if sch.BufferedSlotAt != nil {
		if err := s.decideOne(ctx, sch, *sch.BufferedSlotAt, time.Time{}, true); err != nil {
			return err
		}
	}
	var pending []time.Time
	slot := sch.NextSlotAt
	for !slot.IsZero() && !slot.After(now) && len(pending) < maxWalk {
		pending = append(pending, slot)
		slot = spec.Next(slot)
	}
	next := slot
	if len(pending) == maxWalk && !next.After(now) {
		next = spec.Next(now) // too far behind to walk: the rest is missed too
	}
	var missed, onTime []time.Time
	for _, p := range pending {
		if now.Sub(p) > sch.Misfire {
			missed = append(missed, p)
		} else {
			onTime = append(onTime, p)
		}
	}
	after := next
	if len(onTime) > 0 {
		after = onTime[0]
	}
	if err := s.decideMissed(ctx, sch, missed, after, now); err != nil {
		return err
	}
	for i, p := range onTime {
		n := next
		if i+1 < len(onTime) {
			n = onTime[i+1]
		}
		if err := s.decideOne(ctx, sch, p, n, false); err != nil {
			return err
		}
	}
	return nil
}

// decideMissed records the missed slots as one row (the latest of them, or
// with CATCHUP_LATEST and no slot on time, the one before it) and, with
// CATCHUP_LATEST, fires the latest late.
func (s *Scheduler) decideMissed(ctx context.Context, sch *store.Schedule, missed []time.Time, after, now time.Time) error {
	if len(missed) == 0 {
		return nil
	}
	last := missed[len(missed)-1]
	fireLatest := sch.Catchup == store.CatchupLatest && after.After(now) // no slot on time follows
	record, recordNext, n := last, after, len(missed)
	if fireLatest {
		if n == 1 {
			return s.decideOne(ctx, sch, last, after, false)
		}
		record, recordNext, n = missed[n-2], last, n-1
	}
	reason := fmt.Sprintf("missed: %d slot(s) from %s to %s found later than the misfire threshold (%s); catch-up %s",
		n, missed[0].UTC().Format(time.RFC3339Nano), record.UTC().Format(time.RFC3339Nano), sch.Misfire, sch.Catchup)
	_, err := s.cfg.Store.ScheduleDecide(ctx, &store.ScheduleDecideParams{
		ScheduleID: sch.ID, Owner: s.cfg.Owner, Slot: record, Next: recordNext, Missed: true, MissedReason: reason,
	})
	if err != nil || !fireLatest {
		return err
	}
	return s.decideOne(ctx, sch, last, after, false)
}

// decideOne decides slot, with its job ready should it fire. A job a
// direct submit would be refused (a field rule, a tenant limit) does not
// fire: the slot is recorded SKIPPED with why, or, buffered, waits.
func (s *Scheduler) decideOne(ctx context.Context, sch *store.Schedule, slot, next time.Time, buffered bool) error {
	req, err := s.slotRequest(sch, slot)
	if err != nil {
		return err
	}
	var job *store.JobSubmitParams
	refused := s.refusal(ctx, sch, req)
	if refused == "" {
		if job, err = jobspec.Params(s.cfg.Pipelines, jobspec.Key{Tenant: sch.Tenant, Method: SlotMethod, Value: SlotKey(sch.ID, slot)}, req); err != nil {
			refused = "the job template: " + err.Error()
		}
	}
	if refused != "" && buffered {
		return nil // it waits in the buffer, as for a running job
	}
	res, err := s.cfg.Store.ScheduleDecide(ctx, &store.ScheduleDecideParams{
		ScheduleID: sch.ID, Owner: s.cfg.Owner, Slot: slot, Next: next, Buffered: buffered, Job: job, Refused: refused,
	})
	if err != nil {
		return err
	}
	if res.Decided {
		s.cfg.Logger.DebugContext(ctx, "schedule: slot decided", "schedule", sch.ID, "slot", slot, "outcome", res.Outcome, "job", res.JobID, "reason", res.Reason)
	}
	return nil
}

// refusal says why req may not be submitted now, or "": the field rules
// and the tenant's limits, as for SubmitJob.
func (s *Scheduler) refusal(ctx context.Context, sch *store.Schedule, req *oncejobv1.SubmitJobRequest) string {
	rules := jobspec.Rules{Pipelines: s.cfg.Pipelines, MaxDocumentBytes: s.cfg.MaxDocumentBytes, ProviderBatches: s.cfg.ProviderBatches}
	if rules.MaxDocumentBytes == 0 {
		rules.MaxDocumentBytes = math.MaxInt
	}
	if err := rules.Check(req).Err(); err != nil {
		return "refused: the slot's job breaks a field rule: " + err.Error()
	}
	if s.cfg.Admit != nil {
		if err := s.cfg.Admit(ctx, sch.Tenant, 1, int64(len(jobspec.DocumentBytes(req.GetDocument())))); err != nil {
			return "refused: " + status.Convert(err).Message()
		}
	}
	return ""
}

// slotRequest is the job of one slot: the template, with the slot in its
// params (each slot is a computation of its own) and labels.
func (s *Scheduler) slotRequest(sch *store.Schedule, slot time.Time) (*oncejobv1.SubmitJobRequest, error) {
	var req oncejobv1.SubmitJobRequest
	if err := protojson.Unmarshal(sch.Job, &req); err != nil {
		return nil, fmt.Errorf("schedule %s: job template: %w", sch.ID, err)
	}
	return SlotRequest(&req, sch.ID, slot), nil
}

// SlotParams and SlotLabels are what a slot adds to its template's params
// and labels: CreateSchedule checks the template with them added, so a
// slot's job is within SubmitJob's limits (64 params, 64 labels).
const (
	SlotParams = 1
	SlotLabels = 2
)

// SlotRequest returns the job slot submits: template (which it changes)
// with the slot in its params and the schedule and slot in its labels.
func SlotRequest(template *oncejobv1.SubmitJobRequest, scheduleID string, slot time.Time) *oncejobv1.SubmitJobRequest {
	at := slot.UTC().Format(time.RFC3339Nano)
	if template.Params == nil {
		template.Params = &structpb.Struct{Fields: map[string]*structpb.Value{}}
	}
	if template.Params.Fields == nil {
		template.Params.Fields = map[string]*structpb.Value{}
	}
	template.Params.Fields["schedule_slot"] = structpb.NewStringValue(at)
	labels := maps.Clone(template.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	labels["oncejob.schedule"], labels["oncejob.slot"] = scheduleID, at
	template.Labels = labels
	return template
}
