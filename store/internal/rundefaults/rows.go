package rundefaults

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/oncejob/oncejob/store"
)

// FromRows is the defaults of a store's RunDefaultsGetMany rows (a run's
// id, params and labels as the store returns them), by run id; labels that
// are not the JSON they should be are an error naming the store (name) and
// the run. Both stores' rows have these fields, each as a string.
func FromRows[R ~struct{ ID, Params, Labels string }](name string, rows []R) (map[string]Defaults, error) {
	out := make(map[string]Defaults, len(rows))
	for _, r := range rows {
		row := struct{ ID, Params, Labels string }(r)
		var labels map[string]string
		if err := json.Unmarshal([]byte(row.Labels), &labels); err != nil {
			return nil, fmt.Errorf("%s: run %s: labels column: %w", name, row.ID, err)
		}
		out[row.ID] = Defaults{Params: []byte(row.Params), Labels: labels}
	}
	return out, nil
}

// Run keeps the defaults of run, the run a store has just read (err nil),
// for its jobs' reads (SubmitJobs reads the run first, so the items' jobs
// are answered without a query of their run); it returns run and err.
func (c *Cache) Run(run *store.Run, err error) (*store.Run, error) {
	if err == nil {
		c.Put(run.ID, Defaults{Params: run.Params, Labels: maps.Clone(run.Labels)})
	}
	return run, err
}

// Job is the job of a store's jobs row as its readers see it, mapped by
// f: a run's item with its run's defaults.
func Job[R any](ctx context.Context, c *Cache, f func(R) (*store.Job, error), row R) (*store.Job, error) {
	j, err := f(row)
	if err != nil {
		return nil, err
	}
	if err := c.Apply(ctx, j); err != nil {
		return nil, err
	}
	return j, nil
}
