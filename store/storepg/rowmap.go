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

// jobFromRow is the job of a jobs row.
func jobFromRow(r dbsqlc.Job) (*store.Job, error) {
	return columns.Job(rowmap.JobRow[time.Time](r))
}

// reads is rowmap.Reads over this store's queries.
type reads = rowmap.Reads[dbsqlc.DBTX, dbsqlc.JobCheckpoint, dbsqlc.LlmAttempt, dbsqlc.Job,
	dbsqlc.DocumentGetParams, dbsqlc.CheckpointGetByStageKeyParams, dbsqlc.JobComputedSuccessGetParams,
	dbsqlc.JobGetByIdempotencyKeyParams, dbsqlc.JobGetByIdempotencyKeyRow, dbsqlc.Run, dbsqlc.RunGetByIDParams]

// newReads is the reads of q on db: a run's row mapped by run, with its
// progress by withProgress, and the jobs given their runs' defaults by
// runDefaults.
func newReads(q *dbsqlc.Queries, db dbsqlc.DBTX, run func(dbsqlc.Run) (*store.Run, error),
	withProgress func(context.Context, dbsqlc.Run, time.Time) (*store.Run, error),
	runDefaults func(context.Context, ...*store.Job) error) reads {
	return reads{
		Run: run, RunWithProgress: withProgress, RunDefaults: runDefaults,
		Q: q, DB: db, ID: func(s string) (string, bool) {
			id, err := parseUUID(s)
			return id, err == nil
		},
		Interpret: interpretError, Checkpoint: checkpointFromRow, Job: jobFromRow,
		LLMAttempt: func(r dbsqlc.LlmAttempt) *store.LLMAttempt {
			return columns.LLMAttempt(rowmap.LLMAttemptRow[time.Time](r))
		},
	}
}
