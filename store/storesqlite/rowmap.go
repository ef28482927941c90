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

// newReads is the reads of q on db: a run's row mapped by run, with its
// progress by withProgress, and the jobs given their runs' defaults by
// runDefaults; an id is a uuid in its canonical text.
func newReads(q *dbsqlite.Queries, db dbsqlite.DBTX, run func(dbsqlite.Run) (*store.Run, error),
	withProgress func(context.Context, dbsqlite.Run, time.Time) (*store.Run, error),
	runDefaults func(context.Context, ...*store.Job) error) reads {
	h := rowmap.Handle[dbsqlite.DBTX]{DB: db, Interpret: interpretError}
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
	}
}

// llmAttemptFromRow is the attempt of an llm_attempts row.
func llmAttemptFromRow(r dbsqlite.LlmAttempt) *store.LLMAttempt {
	return columns.LLMAttempt(rowmap.LLMAttemptRow[int64](r))
}
