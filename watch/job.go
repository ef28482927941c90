package watch

import (
	"context"
	"strconv"

	"github.com/oncejob/oncejob/store"
)

// JobParams names the job to watch and where to start.
type JobParams struct {
	Tenant string
	JobID  string
	// AfterSeq: send events with a greater seq; 0 sends all.
	AfterSeq int32
	// Ready, if set, is called once the first read of the log succeeded:
	// the job exists in the tenant and AfterSeq is in range, so the watch
	// is established, before any event is sent.
	Ready func()
}

// WatchJob calls send with each event of the job after p.AfterSeq, in seq
// order with no gaps or duplicates: the backlog, then each new event. It
// returns nil once it has sent — or, for a job already there, found at
// AfterSeq — a terminal event with nothing after it; else the first error
// of send, the store (store.ErrNotFound for a job not in the tenant), ctx,
// ErrAfterSeqPastEnd or ErrShuttingDown.
//
// Per-job seqs become visible in order (store.WatchStore.JobEventList), so
// reading "after the last seq sent" never skips an event that commits
// later.
func (h *Hub) WatchJob(ctx context.Context, p *JobParams, send func(*store.JobEvent) error) error {
	sub, unsubscribe, err := h.subscribe(h.jobs, p.JobID)
	if err != nil {
		return err
	}
	defer unsubscribe()

	need := h.epoch.Load() // after subscribing: see readGroup
	pos := p.AfterSeq
	// The first read starts at AfterSeq itself, to learn that it exists and
	// whether it was terminal.
	from := max(pos-1, 0)
	var last *store.JobEvent
	for {
		events, err := h.readEvents(ctx, p.Tenant, p.JobID, from, need)
		if err != nil {
			return err
		}
		full := len(events) == h.cfg.BatchSize
		if from < pos {
			if len(events) == 0 || events[0].Seq != pos {
				return ErrAfterSeqPastEnd
			}
			last, events = events[0], events[1:]
		}
		if p.Ready != nil {
			p.Ready()
			p.Ready = nil
		}
		if len(events) > 0 {
			pos = events[len(events)-1].Seq
		}
		sub.seq.Store(pos)
		for _, e := range events {
			if err := send(e); err != nil {
				return err
			}
			last = e
		}
		from = pos
		if full {
			if err := h.stopped(ctx); err != nil {
				return err
			}
			continue
		}
		if last != nil && last.Status.Terminal() {
			return nil
		}
		if err := h.wait(ctx, sub); err != nil {
			return err
		}
		need = h.epoch.Load()
	}
}

// readEvents reads a batch of the job's events after a seq. Watchers of one
// job woken by one notification ask for the same batch at once; they share
// one query, if it started at epoch need or later.
func (h *Hub) readEvents(ctx context.Context, tenant, jobID string, after int32, need uint64) ([]*store.JobEvent, error) {
	key := tenant + "\x00" + jobID + "\x00" + strconv.Itoa(int(after))
	return h.reads.do(ctx, key, need, func(ctx context.Context) ([]*store.JobEvent, error) {
		return h.cfg.Store.JobEventList(ctx, &store.JobEventListParams{
			Tenant: tenant, JobID: jobID, AfterSeq: after, Limit: h.cfg.BatchSize,
		})
	})
}
