package storesqlite

import (
	"context"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// Item savepoints nest inside the writer's savepoint of the whole call.
const (
	sqlItemSavepoint         = "SAVEPOINT submit_item"
	sqlItemRollbackSavepoint = "ROLLBACK TO submit_item"
	sqlItemReleaseSavepoint  = "RELEASE submit_item"
)

// jobSubmitDistinct is store.JobSubmitDistinct: a batch set-wise
// (jobSubmitSet: one statement per table), or when that fails, and for a
// lone submission, every submission in a savepoint of its own, so one the
// database refuses rolls back alone.
// It is one write of the single writer, so one transaction, whatever the
// number of submissions (JobSubmitMany, through store.JobSubmitter). Writes
// are serialised, so between a key's insert and the reads after it nothing
// else runs: no concurrent winner to wait for and no sweeper to free the key.
func (s *Store) jobSubmitDistinct(ctx context.Context, jobs []*store.JobSubmitParams) ([]store.JobSubmitItem, error) {
	items := make([]store.JobSubmitItem, len(jobs))
	args := make([]dbsqlite.JobInsertParams, len(jobs))
	for i, p := range jobs {
		var err error
		if args[i], err = jobInsertArgs(p); err != nil {
			items[i].Err = err
		}
	}
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, _ int64) error {
		if len(jobs) > 1 {
			done, err := s.jobSubmitSet(ctx, tx, jobs, args, items)
			if done || err != nil {
				return err
			}
		}
		for i, p := range jobs {
			if items[i].Err != nil {
				continue
			}
			var err error
			if items[i], err = s.jobSubmitItem(ctx, tx, p, args[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return items, nil
}

// jobSubmitItem answers one submission: jobSubmit in a savepoint, rolled
// back if it fails. Each submission gets its own timestamp, so the jobs of
// one call list in their order. The error returned is the savepoint's,
// which leaves the transaction unusable and fails the whole write.
func (s *Store) jobSubmitItem(ctx context.Context, tx *writeTx, p *store.JobSubmitParams, args dbsqlite.JobInsertParams) (store.JobSubmitItem, error) {
	if _, err := tx.ExecContext(ctx, sqlItemSavepoint); err != nil {
		return store.JobSubmitItem{}, interpretError(err)
	}
	var item store.JobSubmitItem
	res, err := s.jobSubmit(ctx, tx, p, args, s.clock.now())
	if err != nil {
		if _, err := tx.ExecContext(ctx, sqlItemRollbackSavepoint); err != nil {
			return store.JobSubmitItem{}, interpretError(err)
		}
		item.Err = submitError(err)
	} else {
		item.Job, item.Outcome = res.Job, res.Outcome
	}
	if _, err := tx.ExecContext(ctx, sqlItemReleaseSavepoint); err != nil {
		return store.JobSubmitItem{}, interpretError(err)
	}
	return item, nil
}

// submitError is store.ErrInvalidRow for a submission the database refused
// for its values (a CHECK such as json_valid(params), a NOT NULL, a taken
// id), as Postgres's data exceptions and integrity violations are.
func submitError(err error) error {
	var sqliteErr *sqlite.Error
	if errors.As(err, &sqliteErr) && sqliteErr.Code()&0xff == sqlite3.SQLITE_CONSTRAINT {
		return fmt.Errorf("storesqlite: %w: %s", store.ErrInvalidRow, sqliteErr.Error())
	}
	return err
}
