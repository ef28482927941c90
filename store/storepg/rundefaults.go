package storepg

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rundefaults"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// A run's params and labels are stored once, on its row; the job of each
// of its items holds its own and the run's id, and is read with the run's
// under its own (docs/architecture.md, "Runs"). s.runs keeps the runs'
// defaults this process read (they never change); Merge writes jsonb's
// text, so a job reads back byte for byte as a row holding the merged
// params would (the worker's stage keys hash that text).

// loadRunDefaults reads the defaults of the runs ids in one query.
func (s *Store) loadRunDefaults(ctx context.Context, ids []string) (map[string]rundefaults.Defaults, error) {
	uuids := make([]string, 0, len(ids))
	for _, id := range ids {
		if u, err := parseUUID(id); err == nil {
			uuids = append(uuids, u)
		}
	}
	rows, err := s.q.RunDefaultsGetMany(ctx, s.pool, uuids)
	if err != nil {
		return nil, interpretError(err)
	}
	return rundefaults.FromRows("storepg", rows)
}

// runFromRow is the run of a runs row, without its progress, its defaults
// kept for its jobs' reads (rundefaults.Cache.Run).
func (s *Store) runFromRow(r dbsqlc.Run) (*store.Run, error) {
	return s.runs.Run(runFromRow(r))
}

// job is the job of a jobs row as its readers see it: a run's item with
// its run's defaults.
func (s *Store) job(ctx context.Context, row dbsqlc.Job) (*store.Job, error) {
	return rundefaults.Job(ctx, s.runs, jobFromRow, row)
}
