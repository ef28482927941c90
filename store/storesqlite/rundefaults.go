package storesqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rundefaults"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// A run's params and labels are stored once, on its row; the job of each
// of its items holds its own and the run's id, and is read with the run's
// under its own (docs/architecture.md, "Runs"). s.runs keeps the runs'
// defaults this process read (they never change); this store keeps params
// as the canonical JSON it is given, and Merge writes canonical JSON, so a
// job reads back byte for byte as a row holding the merged params would.
// The jobs are given their defaults after the writer's transaction, from
// the read pool.

// loadRunDefaults reads the defaults of the runs ids in one query.
func (s *Store) loadRunDefaults(ctx context.Context, ids []string) (map[string]rundefaults.Defaults, error) {
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("storesqlite: run ids: %w", err)
	}
	rows, err := s.q.RunDefaultsGetMany(ctx, s.read, string(list))
	if err != nil {
		return nil, interpretError(err)
	}
	return rundefaults.FromRows("storesqlite", rows)
}

// runFromRow is the run of a runs row, without its progress, its defaults
// kept for its jobs' reads (rundefaults.Cache.Run).
func (s *Store) runFromRow(r dbsqlite.Run) (*store.Run, error) {
	return s.runs.Run(runFromRow(r))
}

// job is the job of a jobs row as its readers see it: a run's item with
// its run's defaults.
func (s *Store) job(ctx context.Context, row dbsqlite.Job) (*store.Job, error) {
	return rundefaults.Job(ctx, s.runs, jobFromRow, row)
}
