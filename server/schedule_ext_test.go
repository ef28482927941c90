package server_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
)

// TestScheduleBadInputWritesNothing: an unparseable cron expression, an
// unknown time zone, an interval too short, both specs or none, and an
// invalid job template are each INVALID_ARGUMENT naming the field, and no
// schedule is written; a valid one is created once per key.
func TestScheduleBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st server.Store) {
		b := setup(t, setupOpts{store: st})
		schedules := oncejobv1.NewScheduleServiceClient(b.conn)
		valid := func() *oncejobv1.CreateScheduleRequest {
			return &oncejobv1.CreateScheduleRequest{Name: "nightly", Spec: &oncejobv1.CreateScheduleRequest_Cron{Cron: "0 3 * * *"}, TimeZone: "Europe/Paris", Job: submitReq("report")}
		}
		for _, tc := range []struct {
			name, field, says string
			edit              func(r *oncejobv1.CreateScheduleRequest)
		}{
			{"unparseable cron", "cron", "cannot parse", func(r *oncejobv1.CreateScheduleRequest) {
				r.Spec = &oncejobv1.CreateScheduleRequest_Cron{Cron: "every day at three"}
			}},
			{"cron out of range", "cron", "above maximum", func(r *oncejobv1.CreateScheduleRequest) {
				r.Spec = &oncejobv1.CreateScheduleRequest_Cron{Cron: "0 25 * * *"}
			}},
			{"unknown time zone", "time_zone", "unknown time zone", func(r *oncejobv1.CreateScheduleRequest) { r.TimeZone = "Europe/Atlantis" }},
			{"interval too short", "interval", "at least 100ms", func(r *oncejobv1.CreateScheduleRequest) {
				r.Spec, r.TimeZone = &oncejobv1.CreateScheduleRequest_Interval{Interval: durationpb.New(10e6)}, ""
			}},
			{"no spec", "cron", "give a cron expression or an interval", func(r *oncejobv1.CreateScheduleRequest) { r.Spec = nil }},
			{"no job", "job", "is required", func(r *oncejobv1.CreateScheduleRequest) { r.Job = nil }},
			{"bad job", "job.pipeline", "unknown pipeline", func(r *oncejobv1.CreateScheduleRequest) { r.Job.Pipeline = "nope" }},
			{"misfire too short", "misfire_threshold", "between 1s and", func(r *oncejobv1.CreateScheduleRequest) { r.MisfireThreshold = durationpb.New(1e6) }},
			// Issue #31, finding 11: refused, not clamped to about 292
			// years (before, both were accepted and clamped).
			{"interval of 10,000 years", "interval", "at most", func(r *oncejobv1.CreateScheduleRequest) {
				r.Spec, r.TimeZone = &oncejobv1.CreateScheduleRequest_Interval{Interval: &durationpb.Duration{Seconds: 315_576_000_000}}, ""
			}},
			{"interval of 101 years", "interval", "at most", func(r *oncejobv1.CreateScheduleRequest) {
				r.Spec, r.TimeZone = &oncejobv1.CreateScheduleRequest_Interval{Interval: &durationpb.Duration{Seconds: 101 * 365 * 86400}}, ""
			}},
			{"misfire of 10,000 years", "misfire_threshold", "between 1s and", func(r *oncejobv1.CreateScheduleRequest) {
				r.MisfireThreshold = &durationpb.Duration{Seconds: 315_576_000_000}
			}},
			// A slot adds one param and two labels: a template at
			// SubmitJob's limits would fire jobs past them (before: 66
			// labels, 65 params).
			{"64 labels", "job.labels", "each slot adds", func(r *oncejobv1.CreateScheduleRequest) { r.Job.Labels = manyLabels(63) }},
			{"64 params", "job.params", "each slot adds", func(r *oncejobv1.CreateScheduleRequest) { r.Job.Params = manyParams(64) }},
		} {
			req := valid()
			tc.edit(req)
			_, err := schedules.CreateSchedule(as(keyAcme, "k-"+tc.name), req)
			requireFieldViolation(t, err, tc.field, tc.says)
		}
		list, err := schedules.ListSchedules(as(keyAcme, ""), &oncejobv1.ListSchedulesRequest{})
		require.NoError(t, err)
		require.Empty(t, list.GetSchedules(), "nothing partial written")

		first, err := schedules.CreateSchedule(as(keyAcme, "nightly"), valid())
		require.NoError(t, err)
		again, err := schedules.CreateSchedule(as(keyAcme, "nightly"), valid())
		require.NoError(t, err)
		require.Equal(t, first.GetSchedule().GetId(), again.GetSchedule().GetId())
		other := valid()
		other.Name = "weekly"
		_, err = schedules.CreateSchedule(as(keyAcme, "nightly"), other)
		requireReason(t, err, codes.InvalidArgument, "IDEMPOTENCY_KEY_REUSED")
		require.Equal(t, "0 3 * * *", first.GetSchedule().GetCron())
		require.Equal(t, oncejobv1.OverlapPolicy_OVERLAP_POLICY_SKIP, first.GetSchedule().GetOverlap())
		next := first.GetSchedule().GetNextSlotTime().AsTime()
		require.Equal(t, 0, next.Minute())
		require.Contains(t, []int{1, 2}, next.Hour(), "03:00 in Paris is 01:00 or 02:00 UTC")
	})
}

func manyLabels(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("l%d", i)] = "v"
	}
	return m
}

func manyParams(n int) *structpb.Struct {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for i := range n {
		s.Fields[fmt.Sprintf("p%d", i)] = structpb.NewStringValue("v")
	}
	return s
}
