package storesqlite

import (
	"context"
	"fmt"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// JobEventList implements store.Store. Both queries run in one read
// transaction, so an empty page and "no such job" are told apart on the same
// snapshot.
func (s *Store) JobEventList(ctx context.Context, params *store.JobEventListParams) ([]*store.JobEvent, error) {
	id, ok := canonicalUUID(params.JobID)
	if !ok {
		return nil, store.ErrNotFound
	}
	tx, err := s.read.beginRead(ctx)
	if err != nil {
		return nil, interpretError(err)
	}
	defer tx.end(ctx)
	rows, err := s.q.JobEventList(ctx, tx, dbsqlite.JobEventListParams{
		Tenant:   params.Tenant,
		JobID:    id,
		AfterSeq: int64(params.AfterSeq),
		Max:      int64(params.PageLimit()),
	})
	events, err := rowmap.Map(rows, err, interpretError, jobEventFromRow)
	if err != nil {
		return nil, err
	}
	return store.JobEventListPage(events, func() (bool, error) {
		exists, err := s.q.JobExists(ctx, tx, dbsqlite.JobExistsParams{Tenant: params.Tenant, ID: id})
		return exists, interpretError(err)
	})
}

// jobEventAppend records the state job jobID has just moved to as its event
// last_event_seq, in the transaction tx of the move.
func (s *Store) jobEventAppend(ctx context.Context, tx *writeTx, jobID, message string) error {
	n, err := s.q.JobEventAppend(ctx, tx, dbsqlite.JobEventAppendParams{JobID: jobID, Message: message})
	if err != nil {
		return interpretError(err)
	}
	if n != 1 {
		return fmt.Errorf("storesqlite: job %s: appended %d events, want 1", jobID, n)
	}
	s.appended.Store(true)
	return nil
}
