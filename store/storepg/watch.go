package storepg

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/internal/rundefaults"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// JobChangeList implements store.WatchStore. The (tx, id) order and the
// snapshot-xmin bound that make a cursor safe are explained in
// internal/dbsqlc/watch.sql and docs/architecture.md.
func (s *Store) JobChangeList(ctx context.Context, params *store.JobChangeListParams) ([]*store.JobChange, error) {
	args := dbsqlc.JobChangeListParams{
		Tenant:   params.Tenant,
		AfterTx:  params.After.Tx,
		AfterID:  params.After.ID,
		Max:      int64(params.PageLimit()),
		MaxBytes: params.PageBytes(),
	}
	if params.Status != "" {
		status := string(params.Status)
		args.Status = &status
	}
	if params.Pipeline != "" {
		args.Pipeline = &params.Pipeline
	}
	rows, err := s.q.JobChangeList(ctx, s.pool, args)
	changes, err := rowmap.MapErr(rows, err, interpretError, func(r dbsqlc.JobChangeListRow) (*store.JobChange, error) {
		r.Job.Output = nil // not read into the job only to be dropped
		job, err := jobFromRow(r.Job)
		if err != nil {
			return nil, err
		}
		return store.NewJobChange(store.JobChangeCursor{Tx: r.JobEvent.Tx, ID: r.JobEvent.ID}, jobEventFromRow(r.JobEvent), job, r.Bytes), nil
	})
	if err != nil {
		return nil, err
	}
	return rundefaults.Changes(ctx, s.runs, changes, params.PageBytes())
}
