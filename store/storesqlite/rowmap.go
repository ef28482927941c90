package storesqlite

import (
	"context"
	"time"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// columns is how this store's rows hold a timestamp (see rowmap.Columns):
// INTEGER unix microseconds.
var columns = rowmap.Columns[int64]{Store: "storesqlite", Time: timeFrom}

// jobFromRow is the job of a jobs row.
func jobFromRow(r dbsqlite.Job) (*store.Job, error) {
	return columns.Job(rowmap.JobRow[int64](r))
}

// reads is rowmap.Reads, embedded in Store under its own name.
type reads = rowmap.Reads

// newReads is the reads of q on the read pool db, so they never wait for
// the writer: a run's row mapped by run, with its progress by withProgress,
// and the jobs given their runs' defaults by runDefaults; an id is a uuid
// in its canonical text; a job's events and whether it exists are read in
// one read transaction, so an empty page and "no such job" are told apart
// on the same snapshot.
func newReads(q *dbsqlite.Queries, db *readDB, run func(dbsqlite.Run) (*store.Run, error),
	withProgress func(context.Context, dbsqlite.Run, time.Time) (*store.Run, error),
	runDefaults func(context.Context, ...*store.Job) error) reads {
	h := rowmap.Handle[dbsqlite.DBTX]{DB: db, Interpret: interpretError, Snapshot: db.snapshot}
	return reads{
		RunDefaults:     runDefaults,
		ID:              canonicalUUID,
		Document:        rowmap.DocumentGet(h, q),
		Checkpoints:     rowmap.CheckpointList(h, q, checkpointFromRow),
		CheckpointByKey: rowmap.CheckpointGetByStageKey(h, q, checkpointFromRow),
		LLMAttempts:     rowmap.LLMAttemptList(h, q, llmAttemptFromRow),
		ComputedSuccess: rowmap.JobComputedSuccessGet(h, q, jobFromRow),
		Keyed:           rowmap.KeyedJob(rowmap.JobGetByIdempotencyKey(h, q), jobFromRow),
		Run:             rowmap.RunGetByID(h, q, run, withProgress),
		APIKey:          rowmap.APIKeyGetByID(h, q, apiKeyFromRow),
		APIKeys:         rowmap.APIKeyList(h, q, apiKeyFromRow),
		Events:          rowmap.JobEvents(h, rowmap.JobEventRows(q, jobEventFromRow), rowmap.JobExists(q)),
		SinkStates:      rowmap.SinkStateList(h, q, sinkStateFromRow),
		RecentSlots:     rowmap.ScheduleSlotList(h, q, scheduleSlotFromRow),
	}
}

// sinkStateFromRow is the state of a sink_states row.
func sinkStateFromRow(r dbsqlite.SinkState) *store.SinkState {
	return columns.SinkState(rowmap.SinkStateRow[int64](r))
}

// llmAttemptFromRow is the attempt of an llm_attempts row.
func llmAttemptFromRow(r dbsqlite.LlmAttempt) *store.LLMAttempt {
	return columns.LLMAttempt(rowmap.LLMAttemptRow[int64](r))
}

// jobEventFromRow is the event of a job_events row.
func jobEventFromRow(r dbsqlite.JobEvent) *store.JobEvent {
	return columns.JobEvent(rowmap.JobEventRow[int64](r))
}

// scheduleSlotFromRow is the slot of a schedule_slots row.
func scheduleSlotFromRow(r dbsqlite.ScheduleSlot) *store.ScheduleSlot {
	return columns.ScheduleSlot(rowmap.ScheduleSlotRow[int64](r))
}
