package watch

import (
	"context"

	"github.com/oncejob/oncejob/store"
)

// WatchJobs calls send with each change of the tenant's jobs after p.After
// that matches p's filters, in the store's global change order, until ctx
// is done, send fails, the store fails or the hub shuts down (it never
// returns nil). The cursor of the last change sent is where to resume.
//
// It wakes on every notification of the tenant and on the store's tail,
// which notifies an event once it is readable here; so an event held back
// by a concurrent transaction (store.WatchStore.JobChangeList) is sent when
// that transaction ends.
func (h *Hub) WatchJobs(ctx context.Context, p *store.JobChangeListParams, send func(*store.JobChange) error) error {
	sub, unsubscribe, err := h.subscribe(h.tenants, p.Tenant)
	if err != nil {
		return err
	}
	defer unsubscribe()

	params := *p
	params.Limit = h.cfg.BatchSize
	for {
		changes, err := h.cfg.Store.JobChangeList(ctx, &params)
		if err != nil {
			return err
		}
		h.signals.ChangesRead.Signal(len(changes))
		for _, c := range changes {
			if err := send(c); err != nil {
				return err
			}
			params.After = c.Cursor
		}
		if len(changes) == params.Limit {
			if err := h.stopped(ctx); err != nil {
				return err
			}
			continue
		}
		if err := h.wait(ctx, sub); err != nil {
			return err
		}
	}
}
