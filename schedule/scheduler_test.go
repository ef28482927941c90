package schedule_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/schedule"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storesqlite/storesqlitetest"
)

func TestSpec(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC) // the night Paris moves to summer time
	paris, err := schedule.ParseSpec("0 3 * * *", "Europe/Paris", 0)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), paris.Next(at), "03:00 in Paris on the night summer time starts is 01:00 UTC")
	require.Equal(t, time.Date(2026, 3, 28, 2, 0, 0, 0, time.UTC), paris.Next(at.Add(-24*time.Hour)), "and 02:00 UTC the day before")
	secs, err := schedule.ParseSpec("*/10 * * * * *", "", 0)
	require.NoError(t, err)
	require.Equal(t, at.Add(10*time.Second), secs.Next(at))
	every, err := schedule.ParseSpec("", "", 1500*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, time.Unix(0, 1500e6*(at.UnixNano()/1500e6+1)).UTC(), every.Next(at), "aligned on the epoch")

	for _, tc := range []struct {
		cron, tz string
		interval time.Duration
		field    string
	}{
		{"61 * * * *", "", 0, "cron"},
		{"* * *", "", 0, "cron"},
		{"* * * * *", "Nowhere/Else", 0, "time_zone"},
		{"", "", 50 * time.Millisecond, "interval"},
		{"* * * * *", "", time.Second, "cron"},
		{"", "", 0, "cron"},
	} {
		_, err := schedule.ParseSpec(tc.cron, tc.tz, tc.interval)
		var se *schedule.SpecError
		require.ErrorAs(t, err, &se, "%+v", tc)
		require.Equal(t, tc.field, se.Field, "%+v", tc)
	}
}

// TestCatchUpAfterDowntime: a schedule whose slots passed an hour ago while
// no server ran records them as missed, once; NONE fires nothing and moves
// to the next slot after now, LATEST fires the latest missed slot once.
func TestCatchUpAfterDowntime(t *testing.T) {
	t.Parallel()
	for _, catchup := range []store.CatchupPolicy{store.CatchupNone, store.CatchupLatest} {
		t.Run(string(catchup), func(t *testing.T) {
			t.Parallel()
			st := storesqlitetest.NewTestStore(t)
			now := time.Now().Truncate(time.Minute).Add(30 * time.Second)
			res, err := st.ScheduleCreate(t.Context(), &store.ScheduleCreateParams{Schedule: store.Schedule{
				ID: "0190a0a0-0000-7000-8000-000000000001", Tenant: "t", IdempotencyKey: "k", Fingerprint: "f", Name: "minutely",
				Cron: "* * * * *", Job: []byte(`{"pipeline":"summarize","document":{"text":"x"}}`), Overlap: store.OverlapSkip,
				Catchup: catchup, Misfire: 5 * time.Second, NextSlotAt: now.Add(-time.Hour).Truncate(time.Minute),
			}})
			require.NoError(t, err)
			s, err := schedule.New(schedule.Config{Store: st, Pipelines: pipeline.Builtin(), Now: func() time.Time { return now }})
			require.NoError(t, err)
			require.NoError(t, s.Tick(t.Context()))
			require.NoError(t, s.Tick(t.Context()), "a second look changes nothing")

			got, err := st.ScheduleGet(t.Context(), &store.ScheduleGetParams{Tenant: "t", ID: res.Schedule.ID})
			require.NoError(t, err)
			require.Equal(t, now.Truncate(time.Minute).Add(time.Minute), got.NextSlotAt.Local().Truncate(0).In(now.Location()), "on to the next slot after now")
			latest := now.Truncate(time.Minute)
			if catchup == store.CatchupNone {
				require.Len(t, got.RecentSlots, 1)
				require.Equal(t, store.SlotMissed, got.RecentSlots[0].Outcome)
				require.Contains(t, got.RecentSlots[0].Reason, "61 slot(s)")
				require.Empty(t, got.LastJobID)
				return
			}
			require.Len(t, got.RecentSlots, 2)
			require.Equal(t, store.SlotFired, got.RecentSlots[0].Outcome)
			require.True(t, latest.Equal(got.RecentSlots[0].SlotAt), "the latest missed slot fires")
			require.Equal(t, store.SlotMissed, got.RecentSlots[1].Outcome)
			require.Contains(t, got.RecentSlots[1].Reason, "60 slot(s)")
			require.Equal(t, got.RecentSlots[0].JobID, got.LastJobID)
			job, err := st.JobGetByID(t.Context(), &store.JobGetByIDParams{Tenant: "t", ID: got.LastJobID})
			require.NoError(t, err)
			require.Equal(t, schedule.SlotKey(res.Schedule.ID, latest), job.IdempotencyKey, "the job is submitted under the slot's key")
			require.JSONEq(t, `{"schedule_slot":"`+latest.UTC().Format(time.RFC3339Nano)+`"}`, string(job.Params), "the slot is in its params")
			require.Equal(t, res.Schedule.ID, job.Labels["oncejob.schedule"])
		})
	}
}
