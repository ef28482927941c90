package storesqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// ScheduleCreate implements store.ScheduleStore.
func (s *Store) ScheduleCreate(ctx context.Context, params *store.ScheduleCreateParams) (*store.ScheduleCreateResult, error) {
	id, ok := canonicalUUID(params.ID)
	if !ok {
		return nil, fmt.Errorf("storesqlite: schedule id %q: %w", params.ID, store.ErrInvalidRow)
	}
	var (
		row      dbsqlite.Schedule
		inserted int64
	)
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		var err error
		inserted, err = s.q.ScheduleInsert(ctx, tx, dbsqlite.ScheduleInsertParams{
			ID: id, Tenant: params.Tenant, IdemKey: params.IdempotencyKey, Fingerprint: params.Fingerprint,
			Name: params.Name, Cron: params.Cron, IntervalMs: params.Interval.Milliseconds(), TimeZone: params.TimeZone,
			Job: string(params.Job), Overlap: string(params.Overlap), Catchup: string(params.Catchup),
			MisfireMs: params.Misfire.Milliseconds(), NextSlotAt: params.NextSlotAt.UnixMicro(), Now: now,
		})
		if err != nil {
			return interpretError(err)
		}
		row, err = s.q.ScheduleGetByKey(ctx, tx, dbsqlite.ScheduleGetByKeyParams{Tenant: params.Tenant, IdemKey: params.IdempotencyKey})
		return interpretError(err)
	})
	if err != nil {
		return nil, err
	}
	sch := scheduleFromRow(row)
	if inserted == 0 {
		return store.ScheduleCreateExisting(params.Fingerprint, sch)
	}
	return &store.ScheduleCreateResult{Schedule: sch}, nil
}

// ScheduleGet implements store.ScheduleStore.
func (s *Store) ScheduleGet(ctx context.Context, params *store.ScheduleGetParams) (*store.Schedule, error) {
	id, ok := canonicalUUID(params.ID)
	if !ok {
		return nil, store.ErrNotFound
	}
	row, err := s.q.ScheduleGetByID(ctx, s.read, dbsqlite.ScheduleGetByIDParams{Tenant: params.Tenant, ID: id})
	return rowmap.OneErr(row, err, interpretError, s.withSlots(ctx))
}

// ScheduleList implements store.ScheduleStore.
func (s *Store) ScheduleList(ctx context.Context, params *store.ScheduleListParams) (*store.ScheduleListResult, error) {
	limit := params.ScheduleListLimit()
	args := dbsqlite.ScheduleListParams{Tenant: params.Tenant, Max: int64(limit) + 1}
	var err error
	if args.AfterCreatedAt, args.AfterID, err = cursorAfter(params.After); err != nil {
		return nil, err
	}
	if params.Documents {
		rows, err := s.q.ScheduleList(ctx, s.read, args)
		if err != nil {
			return nil, interpretError(err)
		}
		return store.ScheduleListPage(rows, limit, s.withSlots(ctx))
	}
	rows, err := s.q.ScheduleListBasic(ctx, s.read, dbsqlite.ScheduleListBasicParams(args))
	if err != nil {
		return nil, interpretError(err)
	}
	read := s.withSlots(ctx)
	return store.ScheduleListPage(rows, limit, func(r dbsqlite.ScheduleListBasicRow) (*store.Schedule, error) {
		return read(dbsqlite.Schedule(r))
	})
}

// ScheduleSetPaused implements store.ScheduleStore.
func (s *Store) ScheduleSetPaused(ctx context.Context, params *store.ScheduleSetPausedParams) (*store.Schedule, error) {
	id, ok := canonicalUUID(params.ID)
	if !ok {
		return nil, store.ErrNotFound
	}
	var row dbsqlite.Schedule
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		var err error
		row, err = s.q.ScheduleSetPaused(ctx, tx, dbsqlite.ScheduleSetPausedParams{
			Paused: params.Paused, NextSlotAt: params.NextSlotAt.UnixMicro(), Now: now, Tenant: params.Tenant, ID: id,
		})
		return interpretError(err)
	})
	if err != nil {
		return nil, err
	}
	return s.withSlots(ctx)(row)
}

// ScheduleDelete implements store.ScheduleStore.
func (s *Store) ScheduleDelete(ctx context.Context, params *store.ScheduleGetParams) error {
	id, ok := canonicalUUID(params.ID)
	if !ok {
		return store.ErrNotFound
	}
	return s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		n, err := s.q.ScheduleDelete(ctx, tx, dbsqlite.ScheduleDeleteParams{Now: &now, Tenant: params.Tenant, ID: id})
		return rowmap.Affected(n, err, interpretError)
	})
}

// ScheduleClaim implements store.ScheduleStore.
func (s *Store) ScheduleClaim(ctx context.Context, params *store.ScheduleClaimParams) ([]*store.Schedule, error) {
	var rows []dbsqlite.Schedule
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, _ int64) error {
		until := params.LeaseUntil.UnixMicro()
		var err error
		rows, err = s.q.ScheduleClaim(ctx, tx, dbsqlite.ScheduleClaimParams{
			Owner: &params.Owner, LeaseUntil: &until, Now: params.Now.UnixMicro(), Max: int64(params.ScheduleClaimLimit()),
		})
		return interpretError(err)
	})
	if err != nil {
		return nil, err
	}
	out := make([]*store.Schedule, len(rows))
	for i, row := range rows {
		out[i] = scheduleFromRow(row)
	}
	return out, nil
}

// ScheduleDecide implements store.ScheduleStore: one write of the single
// writer, so the schedule cannot change under the decision.
func (s *Store) ScheduleDecide(ctx context.Context, params *store.ScheduleDecideParams) (*store.ScheduleDecideResult, error) {
	id, ok := canonicalUUID(params.ScheduleID)
	if !ok {
		return nil, store.ErrNotFound
	}
	var res *store.ScheduleDecideResult
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		sch, err := s.q.ScheduleLock(ctx, tx, dbsqlite.ScheduleLockParams{ID: id, Owner: &params.Owner})
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrLeaseLost
		}
		if err != nil {
			return interpretError(err)
		}
		res, err = s.scheduleDecideTx(ctx, tx, sch, params, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (s *Store) scheduleDecideTx(ctx context.Context, tx *writeTx, sch dbsqlite.Schedule, params *store.ScheduleDecideParams, now int64) (*store.ScheduleDecideResult, error) {
	next := params.Next.UnixMicro()
	if params.Buffered {
		next = sch.NextSlotAt
	}
	buffered := columns.NullTime(sch.BufferedSlotAt)
	lastJob := rowmap.Deref(sch.LastJobID)
	if params.Missed {
		return s.scheduleRecord(ctx, tx, sch, params.Slot, next, store.SlotDecision{Outcome: store.SlotMissed, Reason: params.MissedReason, Buffered: buffered}, now)
	}
	if params.Refused != "" && !params.Buffered {
		return s.scheduleRecord(ctx, tx, sch, params.Slot, next, store.SlotDecision{Outcome: store.SlotSkipped, Reason: params.Refused, Buffered: buffered}, now)
	}
	running := false
	if lastJob != "" {
		st, err := s.q.JobStatusGet(ctx, tx, lastJob)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, interpretError(err)
		}
		running = err == nil && !store.JobStatus(st).Terminal()
	}
	d := store.DecideSlot(store.OverlapPolicy(sch.Overlap), lastJob, running, buffered, params.Slot, params.Buffered)
	if d.Wait {
		return &store.ScheduleDecideResult{Outcome: store.SlotBuffered, JobID: lastJob}, nil
	}
	if d.Outcome != store.SlotFired {
		return s.scheduleRecord(ctx, tx, sch, params.Slot, next, d, now)
	}
	if !params.Buffered {
		inserted, err := s.scheduleSlotInsert(ctx, tx, sch, params.Slot, d, now)
		if err != nil || inserted == 0 {
			return &store.ScheduleDecideResult{}, s.scheduleAdvance(ctx, tx, sch.ID, next, nil, sch.BufferedSlotAt, now, err)
		}
	}
	args, err := jobInsertArgs(params.Job)
	if err != nil {
		return nil, err
	}
	job, err := s.jobSubmit(ctx, tx, params.Job, args, now)
	if err != nil {
		return nil, err
	}
	err = interpretError(s.q.ScheduleSlotSettle(ctx, tx, dbsqlite.ScheduleSlotSettleParams{
		Outcome: string(store.SlotFired), JobID: &job.Job.ID, Now: now, ScheduleID: sch.ID, SlotAt: params.Slot.UnixMicro(),
	}))
	if err := s.scheduleAdvance(ctx, tx, sch.ID, next, &job.Job.ID, micros(d.Buffered), now, err); err != nil {
		return nil, err
	}
	return &store.ScheduleDecideResult{Decided: true, Outcome: store.SlotFired, JobID: job.Job.ID}, nil
}

func (s *Store) scheduleRecord(ctx context.Context, tx *writeTx, sch dbsqlite.Schedule, slot time.Time, next int64, d store.SlotDecision, now int64) (*store.ScheduleDecideResult, error) {
	inserted, err := s.scheduleSlotInsert(ctx, tx, sch, slot, d, now)
	buffered := sch.BufferedSlotAt
	if inserted > 0 {
		buffered = micros(d.Buffered)
	}
	if err := s.scheduleAdvance(ctx, tx, sch.ID, next, nil, buffered, now, err); err != nil {
		return nil, err
	}
	return &store.ScheduleDecideResult{Decided: inserted > 0, Outcome: d.Outcome, JobID: rowmap.Deref(sch.LastJobID), Reason: d.Reason}, nil
}

func (s *Store) scheduleSlotInsert(ctx context.Context, tx *writeTx, sch dbsqlite.Schedule, slot time.Time, d store.SlotDecision, now int64) (int64, error) {
	jobID := sch.LastJobID
	if d.Outcome == store.SlotMissed || d.Outcome == store.SlotFired {
		jobID = nil
	}
	n, err := s.q.ScheduleSlotInsert(ctx, tx, dbsqlite.ScheduleSlotInsertParams{
		ScheduleID: sch.ID, SlotAt: slot.UnixMicro(), Tenant: sch.Tenant, Outcome: string(d.Outcome), JobID: jobID, Reason: d.Reason, Now: now,
	})
	return n, interpretError(err)
}

func (s *Store) scheduleAdvance(ctx context.Context, tx *writeTx, id string, next int64, lastJob *string, buffered *int64, now int64, err error) error {
	if err != nil {
		return err
	}
	return interpretError(s.q.ScheduleAdvance(ctx, tx, dbsqlite.ScheduleAdvanceParams{NextSlotAt: next, LastJobID: lastJob, BufferedSlotAt: buffered, Now: now, ID: id}))
}

// withSlots is the mapping of schedules rows read under ctx, each with its
// recent slots.
func (s *Store) withSlots(ctx context.Context) func(dbsqlite.Schedule) (*store.Schedule, error) {
	return rowmap.WithSlots(ctx, scheduleFromRow, s.RecentSlots)
}

// scheduleFromRow is the schedule of a schedules row, without its slots.
func scheduleFromRow(r dbsqlite.Schedule) *store.Schedule {
	return columns.Schedule(rowmap.ScheduleRow[int64](r))
}

func micros(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	m := t.UnixMicro()
	return &m
}
