package storepg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// columns is how this store's rows hold the column types that differ between
// the stores (see rowmap.Columns): Postgres has each as its Go type.
var columns = rowmap.Columns[pgtype.UUID, pgtype.UUID, int32, bool, time.Time, *time.Time, []byte, []byte]{
	Store:    "storepg",
	UUID:     func(u pgtype.UUID) string { return u.String() },
	NullUUID: uuidString,
	Int32:    rowmap.Same[int32],
	Bool:     rowmap.Same[bool],
	Time:     rowmap.Same[time.Time],
	NullTime: rowmap.Same[*time.Time],
	JSON:     rowmap.Same[[]byte],
	NullJSON: rowmap.Same[[]byte],
}

// jobFromRow is the job of a jobs row.
func jobFromRow(r dbsqlc.Job) (*store.Job, error) {
	return columns.Job(rowmap.JobRow[pgtype.UUID, pgtype.UUID, int32, bool, time.Time, *time.Time, []byte, []byte](r))
}

// reads is rowmap.Reads over this store's queries.
type reads = rowmap.Reads[dbsqlc.DBTX, pgtype.UUID, dbsqlc.JobCheckpoint, dbsqlc.LlmAttempt, dbsqlc.Job,
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
		Q: q, DB: db, ID: func(s string) (pgtype.UUID, bool) {
			id, err := parseUUID(s)
			return id, err == nil
		},
		Interpret: interpretError, Checkpoint: checkpointFromRow, Job: jobFromRow,
		LLMAttempt: func(r dbsqlc.LlmAttempt) *store.LLMAttempt {
			return columns.LLMAttempt(rowmap.LLMAttemptRow[pgtype.UUID, int32, bool, time.Time](r))
		},
	}
}
