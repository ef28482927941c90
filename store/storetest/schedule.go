package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// exerciseSchedule is the conformance suite of ScheduleStore.
func exerciseSchedule(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()

	type testBundle struct {
		store Store
		ctx   context.Context
		t0    time.Time
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return &testBundle{store: newStore(t), ctx: t.Context(), t0: time.Now().Truncate(time.Second).Add(-time.Minute)}
	}

	create := func(t *testing.T, b *testBundle, overlap store.OverlapPolicy) *store.Schedule {
		t.Helper()
		key := newUUID(t)
		res, err := b.store.ScheduleCreate(b.ctx, &store.ScheduleCreateParams{Schedule: store.Schedule{
			ID: newUUID(t), Tenant: "tenant-a", IdempotencyKey: "s-" + key, Fingerprint: "fp-" + key, Name: "every second",
			Interval: time.Second, Job: []byte(`{"pipeline":"invoice"}`), Overlap: overlap, Catchup: store.CatchupNone,
			Misfire: time.Minute, NextSlotAt: b.t0,
		}})
		require.NoError(t, err)
		require.False(t, res.Existing)
		return res.Schedule
	}

	claim := func(t *testing.T, b *testBundle, owner string, now time.Time) []*store.Schedule {
		t.Helper()
		got, err := b.store.ScheduleClaim(b.ctx, &store.ScheduleClaimParams{Owner: owner, Now: now, LeaseUntil: now.Add(10 * time.Second)})
		require.NoError(t, err)
		return got
	}

	// slotJob is the job of a slot, keyed by schedule and slot.
	slotJob := func(t *testing.T, sch *store.Schedule, slot time.Time) *store.JobSubmitParams {
		t.Helper()
		p := newSubmitParams(t)
		p.IdempotencyKey = fmt.Sprintf("schedule:%s:%d", sch.ID, slot.UnixMicro())
		return p
	}

	decide := func(t *testing.T, b *testBundle, sch *store.Schedule, owner string, slot time.Time, buffered bool) *store.ScheduleDecideResult {
		t.Helper()
		res, err := b.store.ScheduleDecide(b.ctx, &store.ScheduleDecideParams{
			ScheduleID: sch.ID, Owner: owner, Slot: slot, Next: slot.Add(time.Second), Buffered: buffered, Job: slotJob(t, sch, slot),
		})
		require.NoError(t, err)
		return res
	}

	finish := func(t *testing.T, b *testBundle, jobID string) {
		t.Helper()
		_, err := b.store.JobUpdateFull(b.ctx, &store.JobUpdateFullParams{
			Tenant: "tenant-a", ID: jobID, Status: store.JobStatusSucceeded, Stage: store.JobStagePublished,
			Attempt: 1, Output: []byte(`{}`), FinishedAt: new(time.Now()), Message: "factory: succeeded",
		})
		require.NoError(t, err)
	}

	t.Run("CreateIsIdempotentByKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := &store.ScheduleCreateParams{Schedule: store.Schedule{
			ID: newUUID(t), Tenant: "tenant-a", IdempotencyKey: "k", Fingerprint: "fp", Name: "nightly",
			Cron: "0 3 * * *", TimeZone: "Europe/Paris", Job: []byte(`{}`), Overlap: store.OverlapSkip,
			Catchup: store.CatchupLatest, Misfire: time.Minute, NextSlotAt: b.t0,
		}}
		first, err := b.store.ScheduleCreate(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, "0 3 * * *", first.Schedule.Cron)
		require.Equal(t, "Europe/Paris", first.Schedule.TimeZone)
		require.Equal(t, store.CatchupLatest, first.Schedule.Catchup)
		again := *p
		again.ID = newUUID(t)
		second, err := b.store.ScheduleCreate(b.ctx, &again)
		require.NoError(t, err)
		require.True(t, second.Existing)
		require.Equal(t, first.Schedule.ID, second.Schedule.ID)
		again.Fingerprint = "other"
		_, err = b.store.ScheduleCreate(b.ctx, &again)
		require.ErrorIs(t, err, store.ErrIdempotencyKeyReused)
	})

	t.Run("ClaimLeasesDueSchedulesToOneOwner", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		sch := create(t, b, store.OverlapSkip)
		require.Empty(t, claim(t, b, "a", b.t0.Add(-time.Second)), "not due yet")
		require.Len(t, claim(t, b, "a", b.t0), 1)
		require.Empty(t, claim(t, b, "b", b.t0.Add(time.Second)), "a holds the lease")
		require.Len(t, claim(t, b, "a", b.t0.Add(time.Second)), 1, "its holder renews it")
		_, err := b.store.ScheduleDecide(b.ctx, &store.ScheduleDecideParams{ScheduleID: sch.ID, Owner: "b", Slot: b.t0, Next: b.t0.Add(time.Second), Job: slotJob(t, sch, b.t0)})
		require.ErrorIs(t, err, store.ErrLeaseLost)
		require.Len(t, claim(t, b, "b", b.t0.Add(time.Minute)), 1, "an expired lease is taken over")
		_, err = b.store.ScheduleDecide(b.ctx, &store.ScheduleDecideParams{ScheduleID: sch.ID, Owner: "a", Slot: b.t0, Next: b.t0.Add(time.Second), Job: slotJob(t, sch, b.t0)})
		require.ErrorIs(t, err, store.ErrLeaseLost, "the old holder is fenced")
	})

	t.Run("SkipFiresEachSlotOnceAndNeverOverlaps", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		sch := create(t, b, store.OverlapSkip)
		claim(t, b, "a", b.t0)
		first := decide(t, b, sch, "a", b.t0, false)
		require.True(t, first.Decided)
		require.Equal(t, store.SlotFired, first.Outcome)
		job, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: "tenant-a", ID: first.JobID})
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("schedule:%s:%d", sch.ID, b.t0.UnixMicro()), job.IdempotencyKey)

		again := decide(t, b, sch, "a", b.t0, false)
		require.False(t, again.Decided, "a slot fires once")
		skipped := decide(t, b, sch, "a", b.t0.Add(time.Second), false)
		require.True(t, skipped.Decided)
		require.Equal(t, store.SlotSkipped, skipped.Outcome)
		require.Contains(t, skipped.Reason, first.JobID)

		finish(t, b, first.JobID)
		third := decide(t, b, sch, "a", b.t0.Add(2*time.Second), false)
		require.Equal(t, store.SlotFired, third.Outcome)
		require.NotEqual(t, first.JobID, third.JobID)

		got, err := b.store.ScheduleGet(b.ctx, &store.ScheduleGetParams{Tenant: "tenant-a", ID: sch.ID})
		require.NoError(t, err)
		require.Equal(t, b.t0.Add(3*time.Second).UTC(), got.NextSlotAt.UTC())
		require.Equal(t, third.JobID, got.LastJobID)
		require.Len(t, got.RecentSlots, 3)
		require.Equal(t, []store.SlotOutcome{store.SlotFired, store.SlotSkipped, store.SlotFired},
			[]store.SlotOutcome{got.RecentSlots[0].Outcome, got.RecentSlots[1].Outcome, got.RecentSlots[2].Outcome})
		require.Equal(t, first.JobID, got.RecentSlots[1].JobID, "a skipped slot names the job it waited for")
	})

	t.Run("AllowFiresEverySlot", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		sch := create(t, b, store.OverlapAllow)
		claim(t, b, "a", b.t0)
		ids := map[string]bool{}
		for i := range 3 {
			res := decide(t, b, sch, "a", b.t0.Add(time.Duration(i)*time.Second), false)
			require.Equal(t, store.SlotFired, res.Outcome)
			ids[res.JobID] = true
		}
		require.Len(t, ids, 3)
	})

	t.Run("BufferOneWaitsThenFires", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		sch := create(t, b, store.OverlapBufferOne)
		claim(t, b, "a", b.t0)
		first := decide(t, b, sch, "a", b.t0, false)
		slot2 := b.t0.Add(time.Second)
		require.Equal(t, store.SlotBuffered, decide(t, b, sch, "a", slot2, false).Outcome)
		require.Equal(t, store.SlotSkipped, decide(t, b, sch, "a", b.t0.Add(2*time.Second), false).Outcome, "one slot buffered at most")
		waiting := decide(t, b, sch, "a", slot2, true)
		require.False(t, waiting.Decided, "the buffered slot waits for the job")

		finish(t, b, first.JobID)
		fired := decide(t, b, sch, "a", slot2, true)
		require.True(t, fired.Decided)
		require.Equal(t, store.SlotFired, fired.Outcome)
		got, err := b.store.ScheduleGet(b.ctx, &store.ScheduleGetParams{Tenant: "tenant-a", ID: sch.ID})
		require.NoError(t, err)
		require.Nil(t, got.BufferedSlotAt)
		require.Equal(t, fired.JobID, got.LastJobID)
		require.Equal(t, b.t0.Add(3*time.Second).UTC(), got.NextSlotAt.UTC(), "firing the buffered slot does not move the schedule back")
	})

	t.Run("MissedSlotsAreRecorded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		sch := create(t, b, store.OverlapSkip)
		claim(t, b, "a", b.t0)
		res, err := b.store.ScheduleDecide(b.ctx, &store.ScheduleDecideParams{ScheduleID: sch.ID, Owner: "a", Slot: b.t0, Next: b.t0.Add(time.Hour), Missed: true, MissedReason: "missed 3600 slots"})
		require.NoError(t, err)
		require.Equal(t, store.SlotMissed, res.Outcome)
		got, err := b.store.ScheduleGet(b.ctx, &store.ScheduleGetParams{Tenant: "tenant-a", ID: sch.ID})
		require.NoError(t, err)
		require.Equal(t, "missed 3600 slots", got.RecentSlots[0].Reason)
		require.Empty(t, got.LastJobID)
	})

	t.Run("PauseResumeDeleteList", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		sch := create(t, b, store.OverlapSkip)
		paused, err := b.store.ScheduleSetPaused(b.ctx, &store.ScheduleSetPausedParams{Tenant: "tenant-a", ID: sch.ID, Paused: true})
		require.NoError(t, err)
		require.True(t, paused.Paused)
		require.Empty(t, claim(t, b, "a", b.t0.Add(time.Hour)), "a paused schedule is never claimed")
		later := b.t0.Add(2 * time.Hour)
		resumed, err := b.store.ScheduleSetPaused(b.ctx, &store.ScheduleSetPausedParams{Tenant: "tenant-a", ID: sch.ID, Paused: false, NextSlotAt: later})
		require.NoError(t, err)
		require.False(t, resumed.Paused)
		require.Equal(t, later.UTC(), resumed.NextSlotAt.UTC(), "slots passed while paused never fire")

		other := create(t, b, store.OverlapSkip)
		page, err := b.store.ScheduleList(b.ctx, &store.ScheduleListParams{Tenant: "tenant-a", Limit: 1})
		require.NoError(t, err)
		require.Equal(t, other.ID, page.Schedules[0].ID)
		require.NotNil(t, page.Next)

		require.NoError(t, b.store.ScheduleDelete(b.ctx, &store.ScheduleGetParams{Tenant: "tenant-a", ID: sch.ID}))
		require.ErrorIs(t, b.store.ScheduleDelete(b.ctx, &store.ScheduleGetParams{Tenant: "tenant-a", ID: sch.ID}), store.ErrNotFound)
		_, err = b.store.ScheduleGet(b.ctx, &store.ScheduleGetParams{Tenant: "tenant-a", ID: sch.ID})
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = b.store.ScheduleGet(b.ctx, &store.ScheduleGetParams{Tenant: "tenant-b", ID: other.ID})
		require.ErrorIs(t, err, store.ErrNotFound)
	})
}
