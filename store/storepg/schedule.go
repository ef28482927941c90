package storepg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// ScheduleCreate implements store.ScheduleStore.
func (s *Store) ScheduleCreate(ctx context.Context, params *store.ScheduleCreateParams) (*store.ScheduleCreateResult, error) {
	id, err := parseUUID(params.ID)
	if err != nil {
		return nil, fmt.Errorf("storepg: schedule id %q: %w", params.ID, store.ErrInvalidRow)
	}
	row, err := s.q.ScheduleInsert(ctx, s.pool, dbsqlc.ScheduleInsertParams{
		ID: id, Tenant: params.Tenant, IdemKey: params.IdempotencyKey, Fingerprint: params.Fingerprint,
		Name: params.Name, Cron: params.Cron, IntervalMs: params.Interval.Milliseconds(), TimeZone: params.TimeZone,
		Job: string(params.Job), Overlap: string(params.Overlap), Catchup: string(params.Catchup),
		MisfireMs: params.Misfire.Milliseconds(), NextSlotAt: params.NextSlotAt,
	})
	existing := errors.Is(err, pgx.ErrNoRows)
	if existing {
		row, err = s.q.ScheduleGetByKey(ctx, s.pool, dbsqlc.ScheduleGetByKeyParams{Tenant: params.Tenant, IdemKey: params.IdempotencyKey})
	}
	if err != nil {
		return nil, interpretError(err)
	}
	sch := scheduleFromRow(row)
	if existing {
		return store.ScheduleCreateExisting(params.Fingerprint, sch)
	}
	return &store.ScheduleCreateResult{Schedule: sch}, nil
}

// ScheduleGet implements store.ScheduleStore.
func (s *Store) ScheduleGet(ctx context.Context, params *store.ScheduleGetParams) (*store.Schedule, error) {
	id, err := parseUUID(params.ID)
	if err != nil {
		return nil, store.ErrNotFound
	}
	row, err := s.q.ScheduleGetByID(ctx, s.pool, dbsqlc.ScheduleGetByIDParams{Tenant: params.Tenant, ID: id})
	return rowmap.OneErr(row, err, interpretError, s.withSlots(ctx))
}

// ScheduleList implements store.ScheduleStore.
func (s *Store) ScheduleList(ctx context.Context, params *store.ScheduleListParams) (*store.ScheduleListResult, error) {
	limit := params.ScheduleListLimit()
	args := dbsqlc.ScheduleListParams{Tenant: params.Tenant, Max: int64(limit + 1)}
	var err error
	if args.AfterCreatedAt, args.AfterID, err = cursorAfter(params.After); err != nil {
		return nil, err
	}
	if params.Documents {
		rows, err := s.q.ScheduleList(ctx, s.pool, args)
		if err != nil {
			return nil, interpretError(err)
		}
		return store.ScheduleListPage(rows, limit, s.withSlots(ctx))
	}
	rows, err := s.q.ScheduleListBasic(ctx, s.pool, dbsqlc.ScheduleListBasicParams(args))
	if err != nil {
		return nil, interpretError(err)
	}
	read := s.withSlots(ctx)
	return store.ScheduleListPage(rows, limit, func(r dbsqlc.ScheduleListBasicRow) (*store.Schedule, error) {
		return read(dbsqlc.Schedule(r))
	})
}

// ScheduleSetPaused implements store.ScheduleStore.
func (s *Store) ScheduleSetPaused(ctx context.Context, params *store.ScheduleSetPausedParams) (*store.Schedule, error) {
	id, err := parseUUID(params.ID)
	if err != nil {
		return nil, store.ErrNotFound
	}
	row, err := s.q.ScheduleSetPaused(ctx, s.pool, dbsqlc.ScheduleSetPausedParams{Paused: params.Paused, NextSlotAt: params.NextSlotAt, Tenant: params.Tenant, ID: id})
	return rowmap.OneErr(row, err, interpretError, s.withSlots(ctx))
}

// ScheduleDelete implements store.ScheduleStore.
func (s *Store) ScheduleDelete(ctx context.Context, params *store.ScheduleGetParams) error {
	id, err := parseUUID(params.ID)
	if err != nil {
		return store.ErrNotFound
	}
	n, err := s.q.ScheduleDelete(ctx, s.pool, dbsqlc.ScheduleDeleteParams{Tenant: params.Tenant, ID: id})
	return rowmap.Affected(n, err, interpretError)
}

// ScheduleClaim implements store.ScheduleStore.
func (s *Store) ScheduleClaim(ctx context.Context, params *store.ScheduleClaimParams) ([]*store.Schedule, error) {
	rows, err := s.q.ScheduleClaim(ctx, s.pool, dbsqlc.ScheduleClaimParams{
		Now: params.Now, Owner: params.Owner, Max: int64(params.ScheduleClaimLimit()), LeaseUntil: params.LeaseUntil,
	})
	if err != nil {
		return nil, interpretError(err)
	}
	out := make([]*store.Schedule, len(rows))
	for i, row := range rows {
		out[i] = scheduleFromRow(dbsqlc.Schedule(row))
	}
	return out, nil
}

// ScheduleDecide implements store.ScheduleStore: one READ COMMITTED
// transaction under the schedule's row lock, so two servers deciding slots
// of one schedule take turns and the second sees the first's job.
func (s *Store) ScheduleDecide(ctx context.Context, params *store.ScheduleDecideParams) (*store.ScheduleDecideResult, error) {
	id, err := parseUUID(params.ScheduleID)
	if err != nil {
		return nil, store.ErrNotFound
	}
	var (
		res     *store.ScheduleDecideResult
		created *dbsqlc.JobSubmitManyRow
	)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		sch, err := s.q.ScheduleLock(ctx, tx, dbsqlc.ScheduleLockParams{ID: id, Owner: params.Owner})
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		res, created, err = s.scheduleDecideTx(ctx, tx, sch, params)
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrLeaseLost) {
			return nil, err
		}
		return nil, interpretError(err)
	}
	if created != nil {
		s.eventCommitted(created.Tenant, created.ID, created.LastEventSeq)
	}
	return res, nil
}

// scheduleDecideTx decides params.Slot of the locked sch.
func (s *Store) scheduleDecideTx(ctx context.Context, tx pgx.Tx, sch dbsqlc.Schedule, params *store.ScheduleDecideParams) (*store.ScheduleDecideResult, *dbsqlc.JobSubmitManyRow, error) {
	next := params.Next
	if params.Buffered {
		next = sch.NextSlotAt
	}
	if params.Missed {
		return s.scheduleRecord(ctx, tx, sch, params.Slot, next, store.SlotDecision{Outcome: store.SlotMissed, Reason: params.MissedReason, Buffered: sch.BufferedSlotAt})
	}
	if params.Refused != "" && !params.Buffered {
		return s.scheduleRecord(ctx, tx, sch, params.Slot, next, store.SlotDecision{Outcome: store.SlotSkipped, Reason: params.Refused, Buffered: sch.BufferedSlotAt})
	}
	running := false
	if sch.LastJobID != nil {
		st, err := s.q.JobStatusGet(ctx, tx, *sch.LastJobID)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, nil, err
		}
		running = err == nil && !store.JobStatus(st).Terminal()
	}
	d := store.DecideSlot(store.OverlapPolicy(sch.Overlap), rowmap.Deref(sch.LastJobID), running, sch.BufferedSlotAt, params.Slot, params.Buffered)
	if d.Wait {
		return &store.ScheduleDecideResult{Outcome: store.SlotBuffered, JobID: rowmap.Deref(sch.LastJobID)}, nil, nil
	}
	if d.Outcome != store.SlotFired {
		return s.scheduleRecord(ctx, tx, sch, params.Slot, next, d)
	}
	if !params.Buffered {
		inserted, err := s.scheduleSlotInsert(ctx, tx, sch, params.Slot, d)
		if err != nil || !inserted {
			return &store.ScheduleDecideResult{}, nil, s.scheduleAdvance(ctx, tx, sch.ID, next, nil, sch.BufferedSlotAt, err)
		}
	}
	job, created, err := s.scheduleSubmit(ctx, tx, params.Job)
	if err != nil {
		return nil, nil, err
	}
	jobID, err := parseUUID(job)
	if err != nil {
		return nil, nil, err
	}
	err = s.q.ScheduleSlotSettle(ctx, tx, dbsqlc.ScheduleSlotSettleParams{Outcome: string(store.SlotFired), JobID: &jobID, ScheduleID: sch.ID, SlotAt: params.Slot})
	if err := s.scheduleAdvance(ctx, tx, sch.ID, next, &jobID, d.Buffered, err); err != nil {
		return nil, nil, err
	}
	return &store.ScheduleDecideResult{Decided: true, Outcome: store.SlotFired, JobID: job}, created, nil
}

// scheduleRecord records a slot that fires nothing and moves on.
func (s *Store) scheduleRecord(ctx context.Context, tx pgx.Tx, sch dbsqlc.Schedule, slot, next time.Time, d store.SlotDecision) (*store.ScheduleDecideResult, *dbsqlc.JobSubmitManyRow, error) {
	inserted, err := s.scheduleSlotInsert(ctx, tx, sch, slot, d)
	buffered := sch.BufferedSlotAt
	if inserted {
		buffered = d.Buffered
	}
	if err := s.scheduleAdvance(ctx, tx, sch.ID, next, nil, buffered, err); err != nil {
		return nil, nil, err
	}
	return &store.ScheduleDecideResult{Decided: inserted, Outcome: d.Outcome, JobID: rowmap.Deref(sch.LastJobID), Reason: d.Reason}, nil, nil
}

func (s *Store) scheduleSlotInsert(ctx context.Context, tx pgx.Tx, sch dbsqlc.Schedule, slot time.Time, d store.SlotDecision) (bool, error) {
	jobID := sch.LastJobID
	if d.Outcome == store.SlotMissed || d.Outcome == store.SlotFired {
		jobID = nil
	}
	_, err := s.q.ScheduleSlotInsert(ctx, tx, dbsqlc.ScheduleSlotInsertParams{
		ScheduleID: sch.ID, SlotAt: slot, Tenant: sch.Tenant, Outcome: string(d.Outcome), JobID: jobID, Reason: d.Reason,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// scheduleAdvance moves the schedule on, unless err (passed through).
func (s *Store) scheduleAdvance(ctx context.Context, tx pgx.Tx, id string, next time.Time, lastJob *string, buffered *time.Time, err error) error {
	if err != nil {
		return err
	}
	return s.q.ScheduleAdvance(ctx, tx, dbsqlc.ScheduleAdvanceParams{NextSlotAt: next, LastJobID: lastJob, BufferedSlotAt: buffered, ID: id})
}

// scheduleSubmit submits a slot's job in tx, as JobSubmit would: created,
// or the job its key already names.
func (s *Store) scheduleSubmit(ctx context.Context, tx pgx.Tx, p *store.JobSubmitParams) (string, *dbsqlc.JobSubmitManyRow, error) {
	row, err := submitRowOf(p)
	if err != nil {
		return "", nil, err
	}
	created, err := s.q.JobSubmitMany(ctx, tx, submitArgs([]submitRow{row}, []int{0}))
	if err != nil {
		return "", nil, err
	}
	if len(created) == 1 {
		return created[0].ID, &created[0], nil
	}
	existing, err := s.q.JobGetByIdempotencyKey(ctx, tx, dbsqlc.JobGetByIdempotencyKeyParams{Tenant: p.Tenant, Method: p.Method, IdempotencyKey: p.IdempotencyKey})
	if err != nil {
		return "", nil, err
	}
	return existing.Job.ID, nil, nil
}

// withSlots is the mapping of schedules rows read under ctx, each with its
// recent slots.
func (s *Store) withSlots(ctx context.Context) func(dbsqlc.Schedule) (*store.Schedule, error) {
	return rowmap.WithSlots(ctx, scheduleFromRow, s.RecentSlots)
}

// scheduleFromRow is the schedule of a schedules row, without its slots.
func scheduleFromRow(r dbsqlc.Schedule) *store.Schedule {
	return columns.Schedule(rowmap.ScheduleRow[time.Time](r))
}
