package storepg

import (
	"context"
	"time"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// columns is how this store's rows hold a timestamp (see rowmap.Columns):
// Postgres has it as its Go type.
var columns = rowmap.Columns[time.Time]{Store: "storepg", Time: rowmap.Same[time.Time]}

// jobFromRow is the job of a jobs row. The fields are named, not converted:
// Postgres's jobs table has its columns in the order a job's updates change
// them (migration 0032), SQLite's in the order they were added.
func jobFromRow(r dbsqlc.Job) (*store.Job, error) {
	return columns.Job(jobRowOf(r))
}

// jobRowOf is r as a rowmap.JobRow, field by field.
func jobRowOf(r dbsqlc.Job) rowmap.JobRow[time.Time] {
	return rowmap.JobRow[time.Time]{
		ID:                r.ID,
		Tenant:            r.Tenant,
		IdempotencyKey:    r.IdempotencyKey,
		DedupKey:          r.DedupKey,
		Pipeline:          r.Pipeline,
		PipelineVersion:   r.PipelineVersion,
		PromptVersion:     r.PromptVersion,
		ModelProfile:      r.ModelProfile,
		Status:            r.Status,
		Stage:             r.Stage,
		Attempt:           r.Attempt,
		Output:            r.Output,
		Error:             r.Error,
		DeduplicatedFrom:  r.DeduplicatedFrom,
		DocumentSha256:    r.DocumentSha256,
		DocumentMediaType: r.DocumentMediaType,
		DocumentName:      r.DocumentName,
		DocumentSizeBytes: r.DocumentSizeBytes,
		Params:            r.Params,
		Labels:            r.Labels,
		PromptTokens:      r.PromptTokens,
		CompletionTokens:  r.CompletionTokens,
		CostMicros:        r.CostMicros,
		LlmCalls:          r.LlmCalls,
		LastEventSeq:      r.LastEventSeq,
		LeaseOwner:        r.LeaseOwner,
		LeaseUntil:        r.LeaseUntil,
		CreatedAt:         r.CreatedAt,
		UpdatedAt:         r.UpdatedAt,
		FinishedAt:        r.FinishedAt,
		RunAfter:          r.RunAfter,
		CancelRequested:   r.CancelRequested,
		BudgetStartedAt:   r.BudgetStartedAt,
		BudgetAttempts:    r.BudgetAttempts,
		BudgetTokens:      r.BudgetTokens,
		Approved:          r.Approved,
		Generation:        r.Generation,
		Traceparent:       r.Traceparent,
		RunID:             r.RunID,
		Priority:          r.Priority,
	}
}

// reads is rowmap.Reads, embedded in Store under its own name.
type reads = rowmap.Reads

// newReads is the reads of q on db: a run's row mapped by run, with its
// progress by withProgress, and the jobs given their runs' defaults by
// runDefaults. The key read runs on keyDB (the plan gate's, plan_cache.go).
func newReads(q *dbsqlc.Queries, db, keyDB dbsqlc.DBTX, run func(dbsqlc.Run) (*store.Run, error),
	withProgress func(context.Context, dbsqlc.Run, time.Time) (*store.Run, error),
	runDefaults func(context.Context, ...*store.Job) error) reads {
	h := rowmap.Handle[dbsqlc.DBTX]{DB: db, Interpret: interpretError}
	return reads{
		RunDefaults: runDefaults,
		ID: func(s string) (string, bool) {
			id, err := parseUUID(s)
			return id, err == nil
		},
		Document:        rowmap.DocumentGet(h, q),
		Checkpoints:     rowmap.CheckpointList(h, q, checkpointFromRow),
		CheckpointByKey: rowmap.CheckpointGetByStageKey(h, q, checkpointFromRow),
		LLMAttempts:     rowmap.LLMAttemptList(h, q, llmAttemptFromRow),
		ComputedSuccess: rowmap.JobComputedSuccessGet(h, q, jobFromRow),
		Keyed:           rowmap.KeyedJob(rowmap.JobGetByIdempotencyKey(rowmap.Handle[dbsqlc.DBTX]{DB: keyDB, Interpret: interpretError}, q), jobFromRow),
		Run:             rowmap.RunGetByID(h, q, run, withProgress),
		APIKey:          rowmap.APIKeyGetByID(h, q, apiKeyFromRow),
		APIKeys:         rowmap.APIKeyList(h, q, apiKeyFromRow),
		Events:          rowmap.JobEvents(h, rowmap.JobEventRows(q, jobEventFromRow), rowmap.JobExists(q)),
		SinkStates:      rowmap.SinkStateList(h, q, sinkStateFromRow),
		RecentSlots:     rowmap.ScheduleSlotList(h, q, scheduleSlotFromRow),
	}
}

// sinkStateFromRow is the state of a sink_states row.
func sinkStateFromRow(r dbsqlc.SinkState) *store.SinkState {
	return columns.SinkState(rowmap.SinkStateRow[time.Time](r))
}

// llmAttemptFromRow is the attempt of an llm_attempts row.
func llmAttemptFromRow(r dbsqlc.LlmAttempt) *store.LLMAttempt {
	return columns.LLMAttempt(rowmap.LLMAttemptRow[time.Time](r))
}

// jobEventFromRow is the event of a job_events row (its tx orders the
// change feed; it is no part of the event).
func jobEventFromRow(r dbsqlc.JobEvent) *store.JobEvent {
	return columns.JobEvent(rowmap.JobEventRow[time.Time]{
		JobID: r.JobID, Seq: r.Seq, Status: r.Status, Stage: r.Stage, Attempt: r.Attempt, Message: r.Message,
		CreatedAt: r.CreatedAt, Tenant: r.Tenant, ID: r.ID, ActorKey: r.ActorKey, ActorRole: r.ActorRole,
		ActorRpc: r.ActorRpc, NextAttemptAt: r.NextAttemptAt,
	})
}

// scheduleSlotFromRow is the slot of a schedule_slots row.
func scheduleSlotFromRow(r dbsqlc.ScheduleSlot) *store.ScheduleSlot {
	return columns.ScheduleSlot(rowmap.ScheduleSlotRow[time.Time](r))
}
