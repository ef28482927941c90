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

// reads is rowmap.Reads over this store's queries.
type reads = rowmap.Reads[dbsqlite.DBTX, dbsqlite.JobCheckpoint, dbsqlite.LlmAttempt, dbsqlite.Job,
	dbsqlite.DocumentGetParams, dbsqlite.CheckpointGetByStageKeyParams, dbsqlite.JobComputedSuccessGetParams,
	dbsqlite.JobGetByIdempotencyKeyParams, dbsqlite.JobGetByIdempotencyKeyRow, dbsqlite.Run, dbsqlite.RunGetByIDParams]

// newReads is the reads of q on db: a run's row mapped by run, with its
// progress by withProgress, and the jobs given their runs' defaults by
// runDefaults; an id is a uuid in its canonical text.
func newReads(q *dbsqlite.Queries, db dbsqlite.DBTX, run func(dbsqlite.Run) (*store.Run, error),
	withProgress func(context.Context, dbsqlite.Run, time.Time) (*store.Run, error),
	runDefaults func(context.Context, ...*store.Job) error) reads {
	return reads{
		Run: run, RunWithProgress: withProgress, RunDefaults: runDefaults,
		Q: q, DB: db, ID: canonicalUUID, Interpret: interpretError, Job: jobFromRow,
		Checkpoint: checkpointFromRow,
		LLMAttempt: func(r dbsqlite.LlmAttempt) *store.LLMAttempt {
			return columns.LLMAttempt(rowmap.LLMAttemptRow[int64](r))
		},
	}
}
