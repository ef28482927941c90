package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/oncejob/oncejob/store"
)

// heartbeater extends the leases of every job a worker runs in one
// JobHeartbeatMany call per interval, instead of one statement per job: a
// worker holding thousands of jobs in flight on LLM calls would otherwise
// spend its connections on heartbeats. A job whose lease is lost or whose
// cancel was requested has its context cancelled with that cause, and is
// beaten no more.
type heartbeater struct {
	w *Worker

	mu   sync.Mutex
	jobs map[string]*beating // by job id
}

type beating struct {
	lease  store.Lease
	cancel context.CancelCauseFunc
}

func newHeartbeater(w *Worker) *heartbeater {
	return &heartbeater{w: w, jobs: map[string]*beating{}}
}

// add beats lease's job until remove, cancelling it through cancel.
func (h *heartbeater) add(lease store.Lease, cancel context.CancelCauseFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.jobs[lease.JobID] = &beating{lease: lease, cancel: cancel}
}

// remove stops beating for lease, and only for it: this worker may have
// claimed the job again, under a new attempt, before the old run ended.
func (h *heartbeater) remove(lease store.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b, ok := h.jobs[lease.JobID]; ok && b.lease == lease {
		delete(h.jobs, lease.JobID)
	}
}

// run beats every interval until ctx is done.
func (h *heartbeater) run(ctx context.Context) {
	t := time.NewTicker(h.w.cfg.HeartbeatInterval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := h.beat(ctx)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			h.w.log.Warn("heartbeat failed; leases may expire", "error", err)
			failing = true
		case err == nil:
			failing = false
		}
	}
}

func (h *heartbeater) beat(ctx context.Context) error {
	h.mu.Lock()
	leases := make([]store.Lease, 0, len(h.jobs))
	for _, b := range h.jobs {
		leases = append(leases, b.lease)
	}
	h.mu.Unlock()
	if len(leases) == 0 {
		return nil
	}
	// A beat must not outlast the next one.
	bctx, cancel := context.WithTimeout(ctx, h.w.cfg.HeartbeatInterval)
	defer cancel()
	res, err := h.w.cfg.Store.JobHeartbeatMany(bctx, &store.JobHeartbeatManyParams{Leases: leases, LeaseDuration: h.w.cfg.LeaseDuration})
	if err != nil {
		for _, l := range leases {
			h.w.signals.Heartbeat.Signal(HeartbeatSignal{JobID: l.JobID, Err: err})
		}
		return err
	}
	stop := map[string]error{}
	lost := map[string]store.Lease{}
	for _, l := range res.Lost {
		stop[l.JobID] = errLeaseLost
		lost[l.JobID] = l
	}
	for _, id := range res.CancelRequested {
		if _, lost := stop[id]; !lost {
			stop[id] = errCancelRequested
		}
	}
	h.mu.Lock()
	for id, cause := range stop {
		b, ok := h.jobs[id]
		if !ok {
			continue
		}
		if l, wasLost := lost[id]; wasLost && b.lease != l {
			continue // an earlier attempt's lease: the job runs again under a new one
		}
		b.cancel(cause)
		delete(h.jobs, id)
	}
	h.mu.Unlock()
	for _, l := range leases {
		sig := HeartbeatSignal{JobID: l.JobID}
		switch cause := stop[l.JobID]; {
		case errors.Is(cause, errLeaseLost):
			sig.Err = store.ErrLeaseLost
		case errors.Is(cause, errCancelRequested):
			sig.CancelRequested = true
		}
		h.w.signals.Heartbeat.Signal(sig)
	}
	return nil
}
