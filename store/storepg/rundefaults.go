package storepg

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

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
	out := make(map[string]rundefaults.Defaults, len(rows))
	for _, row := range rows {
		var labels map[string]string
		if err := json.Unmarshal([]byte(row.Labels), &labels); err != nil {
			return nil, fmt.Errorf("storepg: run %s: labels column: %w", row.ID, err)
		}
		out[row.ID] = rundefaults.Defaults{Params: []byte(row.Params), Labels: labels}
	}
	return out, nil
}

// runFromRow is the run of a runs row, without its progress; its defaults
// are kept for its jobs' reads (SubmitJobs reads the run first, so the
// items' jobs are answered without a query of their run).
func (s *Store) runFromRow(r dbsqlc.Run) (*store.Run, error) {
	run, err := runFromRow(r)
	if err == nil {
		s.runs.Put(run.ID, rundefaults.Defaults{Params: run.Params, Labels: maps.Clone(run.Labels)})
	}
	return run, err
}

// job is the job of a jobs row as its readers see it: a run's item with
// its run's defaults.
func (s *Store) job(ctx context.Context, row dbsqlc.Job) (*store.Job, error) {
	j, err := jobFromRow(row)
	if err != nil {
		return nil, err
	}
	if err := s.runs.Apply(ctx, j); err != nil {
		return nil, err
	}
	return j, nil
}
