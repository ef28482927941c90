package server

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/jobkey"
	"github.com/oncejob/oncejob/schedule"
	"github.com/oncejob/oncejob/server/idempotency"
	"github.com/oncejob/oncejob/server/membudget"
	"github.com/oncejob/oncejob/server/pagetoken"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
)

// defaultMisfire is how late a slot may fire by default.
const defaultMisfire = time.Minute

// scheduleMethods need an idempotency key.
var scheduleMethods = []string{oncejobv1.ScheduleService_CreateSchedule_FullMethodName}

var (
	overlapFromProto = map[oncejobv1.OverlapPolicy]store.OverlapPolicy{
		oncejobv1.OverlapPolicy_OVERLAP_POLICY_UNSPECIFIED: store.OverlapSkip,
		oncejobv1.OverlapPolicy_OVERLAP_POLICY_SKIP:        store.OverlapSkip,
		oncejobv1.OverlapPolicy_OVERLAP_POLICY_BUFFER_ONE:  store.OverlapBufferOne,
		oncejobv1.OverlapPolicy_OVERLAP_POLICY_ALLOW:       store.OverlapAllow,
	}
	catchupFromProto = map[oncejobv1.CatchupPolicy]store.CatchupPolicy{
		oncejobv1.CatchupPolicy_CATCHUP_POLICY_UNSPECIFIED: store.CatchupNone,
		oncejobv1.CatchupPolicy_CATCHUP_POLICY_NONE:        store.CatchupNone,
		oncejobv1.CatchupPolicy_CATCHUP_POLICY_LATEST:      store.CatchupLatest,
	}
	slotOutcomeToProto = map[store.SlotOutcome]oncejobv1.SlotOutcome{
		store.SlotFired:    oncejobv1.SlotOutcome_SLOT_OUTCOME_FIRED,
		store.SlotSkipped:  oncejobv1.SlotOutcome_SLOT_OUTCOME_SKIPPED,
		store.SlotBuffered: oncejobv1.SlotOutcome_SLOT_OUTCOME_BUFFERED,
		store.SlotMissed:   oncejobv1.SlotOutcome_SLOT_OUTCOME_MISSED,
	}
)

// scheduleService implements oncejobv1.ScheduleServiceServer on a
// store.ScheduleStore; the slots are fired by schedule.Scheduler.
type scheduleService struct {
	oncejobv1.UnimplementedScheduleServiceServer
	jobs  *jobService
	store store.ScheduleStore
	now   func() time.Time
}

// CreateSchedule creates a schedule, or returns the one its key created.
//
// Idempotency contract:
//   - Identity: tenant + method + `idempotency-key` metadata (required),
//     with the fingerprint of the whole request.
//   - Window: the schedule's life (the key lives on its row).
//   - Response: a replay returns the schedule as it is now with
//     `idempotent-replayed: true`; another fingerprint is INVALID_ARGUMENT,
//     IDEMPOTENCY_KEY_REUSED.
func (s *scheduleService) CreateSchedule(ctx context.Context, req *oncejobv1.CreateScheduleRequest) (*oncejobv1.CreateScheduleResponse, error) {
	key, ok := idempotency.FromContext(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "idempotency key missing after interceptor")
	}
	spec, err := schedule.ParseSpec(req.GetCron(), req.GetTimeZone(), req.GetInterval().AsDuration())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%v", err) // validated
	}
	canonical, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "request: %v", err)
	}
	fp, err := jobkey.RequestFingerprint(map[string]any{"request": base64.StdEncoding.EncodeToString(canonical)})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "fingerprint: %v", err)
	}
	job, err := protojson.Marshal(req.GetJob())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "job template: %v", err)
	}
	misfire := defaultMisfire
	if req.GetMisfireThreshold() != nil {
		misfire = req.GetMisfireThreshold().AsDuration()
	}
	var interval time.Duration
	if req.GetInterval() != nil {
		interval = req.GetInterval().AsDuration()
	}
	res, err := s.store.ScheduleCreate(ctx, &store.ScheduleCreateParams{Schedule: store.Schedule{
		ID: newID(), Tenant: key.Tenant, IdempotencyKey: key.Value, Fingerprint: fp, Name: req.GetName(),
		Cron: req.GetCron(), Interval: interval, TimeZone: req.GetTimeZone(), Job: job,
		Overlap: overlapFromProto[req.GetOverlap()], Catchup: catchupFromProto[req.GetCatchup()], Misfire: misfire,
		NextSlotAt: spec.Next(s.now()),
	}})
	if err != nil {
		return nil, s.jobs.storeError(ctx, err, "schedule")
	}
	if res.Existing {
		idempotency.MarkReplayed(ctx)
	}
	return &oncejobv1.CreateScheduleResponse{Schedule: scheduleToProto(res.Schedule)}, nil
}

// ListSchedules returns one page of the caller's schedules. Read-only.
func (s *scheduleService) ListSchedules(ctx context.Context, req *oncejobv1.ListSchedulesRequest) (*oncejobv1.ListSchedulesResponse, error) {
	t, _ := tenant.FromContext(ctx)
	params := &store.ScheduleListParams{Tenant: t, Limit: int(req.GetPageSize())}
	if req.GetPageToken() != "" {
		after, err := decodePageToken(s.jobs.tokens, pagetoken.Schedules, t, req.GetPageToken(), nil)
		if err != nil {
			return nil, pageTokenError(err)
		}
		params.After = after
	}
	res, err := s.store.ScheduleList(ctx, params) // without documents
	if err != nil {
		return nil, s.jobs.storeError(ctx, err, "schedules")
	}
	if req.GetView() == oncejobv1.ScheduleView_SCHEDULE_VIEW_FULL {
		hold := s.jobs.cfg.Memory.Hold("a page of schedules")
		defer hold.Release()
		if err := s.withDocuments(ctx, t, res, hold); err != nil {
			return nil, err
		}
	}
	resp := &oncejobv1.ListSchedulesResponse{}
	for _, sch := range res.Schedules {
		resp.Schedules = append(resp.Schedules, scheduleToProto(sch))
	}
	if res.Next != nil {
		resp.NextPageToken = encodePageToken(s.jobs.tokens, pagetoken.Schedules, t, res.Next, nil)
	}
	return resp, nil
}

// fullScheduleViewBytes bounds the templates a SCHEDULE_VIEW_FULL page holds past
// its first schedule.
const fullScheduleViewBytes = 2 << 20

// withDocuments reads the page's schedules again with their documents,
// one at a time, each drawn from the memory budget, and ends the page
// after the one that takes the templates past fullScheduleViewBytes, so a page of
// the FULL view holds a bounded amount however large each document is.
func (s *scheduleService) withDocuments(ctx context.Context, t string, res *store.ScheduleListResult, hold *membudget.Hold) error {
	var total int64
	for i, basic := range res.Schedules {
		full, err := s.store.ScheduleGet(ctx, &store.ScheduleGetParams{Tenant: t, ID: basic.ID})
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted since: keep it as listed
		}
		if err != nil {
			return s.jobs.storeError(ctx, err, "schedule "+basic.ID)
		}
		if err := hold.Grow(int64(len(full.Job))); err != nil {
			return err
		}
		res.Schedules[i] = full
		if total += int64(len(full.Job)); total > fullScheduleViewBytes && i < len(res.Schedules)-1 {
			res.Schedules = res.Schedules[:i+1]
			res.Next = &store.JobCursor{CreatedAt: full.CreatedAt, ID: full.ID}
			return nil
		}
	}
	return nil
}

// GetSchedule returns one of the caller's schedules with its template's
// document. Read-only.
func (s *scheduleService) GetSchedule(ctx context.Context, req *oncejobv1.GetScheduleRequest) (*oncejobv1.GetScheduleResponse, error) {
	t, _ := tenant.FromContext(ctx)
	sch, err := s.store.ScheduleGet(ctx, &store.ScheduleGetParams{Tenant: t, ID: req.GetScheduleId()})
	if err != nil {
		return nil, s.jobs.storeError(ctx, err, "schedule "+req.GetScheduleId())
	}
	return &oncejobv1.GetScheduleResponse{Schedule: scheduleToProto(sch)}, nil
}

// PauseSchedule stops a schedule firing. Idempotency contract: the state
// decides (tenant + schedule id, no key); pausing a paused schedule returns
// it.
func (s *scheduleService) PauseSchedule(ctx context.Context, req *oncejobv1.PauseScheduleRequest) (*oncejobv1.PauseScheduleResponse, error) {
	sch, err := s.setPaused(ctx, req.GetScheduleId(), true)
	if err != nil {
		return nil, err
	}
	return &oncejobv1.PauseScheduleResponse{Schedule: sch}, nil
}

// ResumeSchedule lets a paused schedule fire again from its first slot
// after now. Idempotency contract: the state decides; resuming an active
// schedule returns it unchanged.
func (s *scheduleService) ResumeSchedule(ctx context.Context, req *oncejobv1.ResumeScheduleRequest) (*oncejobv1.ResumeScheduleResponse, error) {
	sch, err := s.setPaused(ctx, req.GetScheduleId(), false)
	if err != nil {
		return nil, err
	}
	return &oncejobv1.ResumeScheduleResponse{Schedule: sch}, nil
}

func (s *scheduleService) setPaused(ctx context.Context, id string, paused bool) (*oncejobv1.Schedule, error) {
	t, _ := tenant.FromContext(ctx)
	current, err := s.store.ScheduleGet(ctx, &store.ScheduleGetParams{Tenant: t, ID: id})
	if err != nil {
		return nil, s.jobs.storeError(ctx, err, "schedule "+id)
	}
	spec, err := schedule.ParseSpec(current.Cron, current.TimeZone, current.Interval)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "schedule %s: %v", id, err)
	}
	sch, err := s.store.ScheduleSetPaused(ctx, &store.ScheduleSetPausedParams{Tenant: t, ID: id, Paused: paused, NextSlotAt: spec.Next(s.now())})
	if err != nil {
		return nil, s.jobs.storeError(ctx, err, "schedule "+id)
	}
	return scheduleToProto(sch), nil
}

// DeleteSchedule deletes a schedule; its jobs stay. Idempotency contract:
// the state decides; a deleted schedule is NOT_FOUND.
func (s *scheduleService) DeleteSchedule(ctx context.Context, req *oncejobv1.DeleteScheduleRequest) (*oncejobv1.DeleteScheduleResponse, error) {
	t, _ := tenant.FromContext(ctx)
	if err := s.store.ScheduleDelete(ctx, &store.ScheduleGetParams{Tenant: t, ID: req.GetScheduleId()}); err != nil {
		return nil, s.jobs.storeError(ctx, err, "schedule "+req.GetScheduleId())
	}
	return &oncejobv1.DeleteScheduleResponse{}, nil
}

func scheduleToProto(sch *store.Schedule) *oncejobv1.Schedule {
	out := &oncejobv1.Schedule{
		Id: sch.ID, IdempotencyKey: sch.IdempotencyKey, Name: sch.Name, TimeZone: sch.TimeZone,
		Overlap:          oncejobv1.OverlapPolicy(oncejobv1.OverlapPolicy_value["OVERLAP_POLICY_"+strings.ToUpper(string(sch.Overlap))]),
		Catchup:          oncejobv1.CatchupPolicy(oncejobv1.CatchupPolicy_value["CATCHUP_POLICY_"+strings.ToUpper(string(sch.Catchup))]),
		MisfireThreshold: durationpb.New(sch.Misfire), Paused: sch.Paused,
		NextSlotTime: timestamppb.New(sch.NextSlotAt), CreateTime: timestamppb.New(sch.CreatedAt),
	}
	if sch.Cron != "" {
		out.Spec = &oncejobv1.Schedule_Cron{Cron: sch.Cron}
	} else {
		out.Spec = &oncejobv1.Schedule_Interval{Interval: durationpb.New(sch.Interval)}
	}
	var job oncejobv1.SubmitJobRequest
	if protojson.Unmarshal(sch.Job, &job) == nil {
		out.Job = &job
	}
	for _, sl := range sch.RecentSlots {
		out.RecentSlots = append(out.RecentSlots, &oncejobv1.ScheduleSlot{
			SlotTime: timestamppb.New(sl.SlotAt), Outcome: slotOutcomeToProto[sl.Outcome], JobId: sl.JobID,
			Reason: sl.Reason, DecideTime: timestamppb.New(sl.DecidedAt),
		})
	}
	return out
}

// maxScheduleDuration bounds a schedule's interval and misfire threshold:
// 100 years, far past any use, and far from the bounds of time.Duration
// (about 292 years) and of the slot arithmetic (up to the year 2262), so
// that what is asked is what runs; beyond it a request is refused, never
// clamped.
const maxScheduleDuration = 100 * 365 * 24 * time.Hour

// validateScheduleRequest checks ScheduleService's requests.
func (s *jobService) validateScheduleRequest(req any, v *violations) {
	switch r := req.(type) {
	case *oncejobv1.CreateScheduleRequest:
		if n := utf8.RuneCountInString(r.GetName()); n == 0 || n > maxNameLen || !utf8.ValidString(r.GetName()) {
			v.add("name", "is required: valid UTF-8 of 1-%d characters", maxNameLen)
		}
		var interval time.Duration
		if r.GetInterval() != nil {
			if err := r.GetInterval().CheckValid(); err != nil {
				v.add("interval", "%v", err)
			} else if r.GetInterval().GetSeconds() > int64(maxScheduleDuration/time.Second) {
				// AsDuration would clamp it (at about 292 years) and the
				// schedule would fire at another interval than asked.
				v.add("interval", "must be at most %s (%d days)", maxScheduleDuration, maxScheduleDuration/(24*time.Hour))
			}
			interval = r.GetInterval().AsDuration()
			if interval == 0 {
				interval = -1 // given, but zero: refused as too short
			}
		}
		if _, err := schedule.ParseSpec(r.GetCron(), r.GetTimeZone(), interval); err != nil {
			var se *schedule.SpecError
			if errors.As(err, &se) {
				v.add(se.Field, "%v", se.Err)
			} else {
				v.add("cron", "%v", err)
			}
		}
		if r.GetJob() == nil {
			v.add("job", "is required: the job each slot submits")
		} else {
			var job violations
			s.validateSubmit(r.GetJob(), &job)
			if len(job) == 0 {
				// What each slot submits: the template and what the slot
				// adds, held to SubmitJob's rules (64 params, 64 labels).
				slotJob := schedule.SlotRequest(proto.CloneOf(r.GetJob()), uuid.Nil.String(), time.Unix(0, 0))
				s.validateSubmit(slotJob, &job)
				for _, fv := range job {
					fv.Description += " (counting what each slot adds: the param schedule_slot and the labels oncejob.schedule and oncejob.slot)"
				}
			}
			*v = append(*v, job.prefixed("job.")...)
		}
		if _, ok := overlapFromProto[r.GetOverlap()]; !ok {
			v.add("overlap", "unknown overlap policy %d", r.GetOverlap())
		}
		if _, ok := catchupFromProto[r.GetCatchup()]; !ok {
			v.add("catchup", "unknown catch-up policy %d", r.GetCatchup())
		}
		if m := r.GetMisfireThreshold(); m != nil && (m.CheckValid() != nil || m.AsDuration() < time.Second || m.GetSeconds() > int64(maxScheduleDuration/time.Second)) {
			v.add("misfire_threshold", "must be between 1s and %s (%d days)", maxScheduleDuration, maxScheduleDuration/(24*time.Hour))
		}
	case *oncejobv1.PauseScheduleRequest:
		validateID(&r.ScheduleId, "schedule_id", v)
	case *oncejobv1.ResumeScheduleRequest:
		validateID(&r.ScheduleId, "schedule_id", v)
	case *oncejobv1.DeleteScheduleRequest:
		validateID(&r.ScheduleId, "schedule_id", v)
	case *oncejobv1.GetScheduleRequest:
		validateID(&r.ScheduleId, "schedule_id", v)
	case *oncejobv1.ListSchedulesRequest:
		if r.GetPageSize() < 0 || r.GetPageSize() > 100 {
			v.add("page_size", "must be between 0 and 100")
		}
		if _, ok := oncejobv1.ScheduleView_name[int32(r.GetView())]; !ok {
			v.add("view", "unknown view %d", r.GetView())
		}
	}
}
