package storesqlite

import (
	"context"
	"fmt"

	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

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
