package schedule_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/jobspec"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/schedule"
	"github.com/oncejob/oncejob/server/limits"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/store/storesqlite/storesqlitetest"
)

// testStore is what these tests use of a store.
type testStore interface {
	store.ScheduleStore
	store.Store
	store.UsageStore
}

// forEachStore runs fn with a maker of fresh embedded stores and one of
// fresh Postgres schemas.
func forEachStore(t *testing.T, fn func(t *testing.T, newStore func(t *testing.T) testStore)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, func(t *testing.T) testStore { return storesqlitetest.NewTestStore(t) })
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, func(t *testing.T) testStore { return storepgtest.NewTestStore(t) })
	})
}

// dueSchedule creates a minutely schedule of tenant t whose slot is due at
// now (within the misfire threshold) and returns it and the slot.
func dueSchedule(t *testing.T, st testStore, now time.Time, job string) (*store.Schedule, time.Time) {
	t.Helper()
	slot := now.Truncate(time.Minute)
	res, err := st.ScheduleCreate(t.Context(), &store.ScheduleCreateParams{Schedule: store.Schedule{
		ID: "0190a0a0-0000-7000-8000-0000000000aa", Tenant: "t", IdempotencyKey: "k", Fingerprint: "f", Name: "minutely",
		Cron: "* * * * *", Job: []byte(job), Overlap: store.OverlapSkip,
		Catchup: store.CatchupNone, Misfire: time.Minute, NextSlotAt: slot,
	}})
	require.NoError(t, err)
	return res.Schedule, slot
}

// TestASubmitterCannotTakeASlot (issue #31, finding 4): a job submitted
// through SubmitJob under the next slot's key, before the slot fires (and
// never finishing), is not the slot's job: the slot fires its own job,
// from the template. Before, the slot recorded the caller's job as fired
// (no fingerprint compared) and, under the default overlap policy, every
// later slot was skipped while that job ran.
func TestASubmitterCannotTakeASlot(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, newStore func(t *testing.T) testStore) {
		st := newStore(t)
		now := time.Now().Truncate(time.Minute).Add(10 * time.Second)
		sch, slot := dueSchedule(t, st, now, `{"pipeline":"summarize","document":{"text":"the operator's report"}}`)

		var hostile oncejobv1.SubmitJobRequest
		require.NoError(t, protojson.Unmarshal([]byte(`{"pipeline":"summarize","document":{"text":"the submitter's text"}}`), &hostile))
		p, err := jobspec.Params(pipeline.Builtin(), jobspec.Key{Tenant: "t", Method: jobspec.SubmitMethod, Value: schedule.SlotKey(sch.ID, slot)}, &hostile)
		require.NoError(t, err)
		taken, err := st.JobSubmit(t.Context(), p)
		require.NoError(t, err)

		s, err := schedule.New(schedule.Config{Store: st, Pipelines: pipeline.Builtin(), Now: func() time.Time { return now }})
		require.NoError(t, err)
		require.NoError(t, s.Tick(t.Context()))
		got, err := st.ScheduleGet(t.Context(), &store.ScheduleGetParams{Tenant: "t", ID: sch.ID})
		require.NoError(t, err)
		require.Len(t, got.RecentSlots, 1)
		require.Equal(t, store.SlotFired, got.RecentSlots[0].Outcome)
		require.NotEqual(t, taken.Job.ID, got.LastJobID, "the slot's job is its own, not the submitter's")
		job, err := st.JobGetByID(t.Context(), &store.JobGetByIDParams{Tenant: "t", ID: got.LastJobID})
		require.NoError(t, err)
		require.Equal(t, schedule.SlotKey(sch.ID, slot), job.IdempotencyKey)
		require.Equal(t, sch.ID, job.Labels["oncejob.schedule"])
	})
}

// TestASlotIsHeldToTheLimitsOfASubmit (issue #31, finding 11): a slot's
// job is held to the tenant's limits (here jobs in flight, and document
// bytes a day) and to SubmitJob's field rules; a slot over them is
// recorded SKIPPED with why, and fires nothing. Before, schedules
// bypassed both limits, and a template with 64 labels fired a job with 66.
func TestASlotIsHeldToTheLimitsOfASubmit(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, newStore func(t *testing.T) testStore) {
		for _, tc := range []struct {
			name   string
			limit  limits.Tenant
			job    string
			reason string
		}{
			{"jobs in flight", limits.Tenant{JobsInFlight: 1}, `{"pipeline":"summarize","document":{"text":"x"}}`, "jobs in flight"},
			{"document bytes a day", limits.Tenant{DocumentBytesPerDay: 20}, `{"pipeline":"summarize","document":{"text":"twenty-one bytes long"}}`, "document bytes"},
			{"labels", limits.Tenant{}, `{"pipeline":"summarize","document":{"text":"x"},"labels":{` + labels(64) + `}}`, "labels"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tenant := "t"
				now := time.Now().Truncate(time.Minute).Add(10 * time.Second)
				sub := newStore(t)
				sch, _ := dueSchedule(t, sub, now, tc.job)
				if tc.limit.JobsInFlight > 0 { // one job already in flight
					var req oncejobv1.SubmitJobRequest
					require.NoError(t, protojson.Unmarshal([]byte(`{"pipeline":"summarize","document":{"text":"in flight"}}`), &req))
					p, err := jobspec.Params(pipeline.Builtin(), jobspec.Key{Tenant: tenant, Method: jobspec.SubmitMethod, Value: "busy"}, &req)
					require.NoError(t, err)
					_, err = sub.JobSubmit(t.Context(), p)
					require.NoError(t, err)
				}
				lim, err := limits.New(limits.Config{Default: tc.limit, Usage: sub})
				require.NoError(t, err)
				s, err := schedule.New(schedule.Config{Store: sub, Pipelines: pipeline.Builtin(), Admit: lim.Admit, MaxDocumentBytes: 1 << 20, Now: func() time.Time { return now }})
				require.NoError(t, err)
				require.NoError(t, s.Tick(context.Background()))
				got, err := sub.ScheduleGet(t.Context(), &store.ScheduleGetParams{Tenant: tenant, ID: sch.ID})
				require.NoError(t, err)
				require.Len(t, got.RecentSlots, 1)
				require.Equal(t, store.SlotSkipped, got.RecentSlots[0].Outcome, "refused, fired nothing")
				require.Contains(t, got.RecentSlots[0].Reason, tc.reason)
				require.Empty(t, got.LastJobID)
			})
		}
	})
}

func labels(n int) string {
	s := ""
	for i := range n {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf(`"l%d":"v"`, i)
	}
	return s
}
