package worker

import (
	"context"
	"errors"
	"time"

	"github.com/oncejob/oncejob/retry"
	"github.com/oncejob/oncejob/store"
)

// requeueAfterOutage gives a job back once the store answers again, after
// the store failed under the attempt (store.ErrUnavailable: a restart, a
// cut connection). The database cut the attempt short, not the job, so the
// attempt goes back to the budget, as at shutdown, and the job is due at
// once — instead of waiting out its lease and being taken over with an
// attempt counted, which would let a few database restarts dead-letter a
// healthy job. The fence still holds: the requeue matches only while this
// worker's lease is the job's (it need not be unexpired: during an outage
// nobody can take the job over), and the heartbeat goes on meanwhile, so
// the lease is renewed as soon as the store answers.
//
// It gives up, leaving the lease to expire as before, when another worker
// holds the job, the store fails otherwise, the worker shuts down, or the
// outage outlasts maxOutageWait.
func (r *run) requeueAfterOutage(ctx context.Context, cause error) {
	r.log.Warn("the store failed under the attempt; requeueing the job once it answers", "error", cause)
	giveUp := time.Now().Add(maxOutageWait)
	for n := 1; ; n++ {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		now := r.w.cfg.Now()
		_, err := r.w.cfg.Store.JobTransition(wctx, &store.JobTransitionParams{
			Lease: r.lease, To: store.JobStatusRetryWait, RunAfter: &now, RefundAttempt: true,
			Message: "the store failed under the attempt; requeued",
		})
		cancel()
		switch {
		case err == nil:
			r.ended = attemptEnd{status: store.JobStatusRetryWait}
			r.log.Info("job requeued after a store outage; the attempt was given back")
			return
		case errors.Is(err, store.ErrLeaseLost):
			r.log.Warn("lease lost during the store outage; another worker holds the job")
			return
		case ctx.Err() != nil:
			return // shutting down: the lease expires
		case !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded):
			r.log.Error("requeueing after a store outage failed; the lease will expire", "error", err)
			return
		case time.Now().After(giveUp):
			r.log.Error("the store outage outlasted the wait; the lease will expire", "error", err, "waited", maxOutageWait.String())
			return
		}
		t := time.NewTimer(outageBackoff.Wait(n, retry.Jitter())) // full jitter: workers do not return in step
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// outageBackoff paces the tries to give a job back during an outage.
var outageBackoff = retry.Backoff{Initial: 50 * time.Millisecond, Max: 2 * time.Second, Multiplier: 2}

// maxOutageWait bounds how long a worker holds a job whose attempt a store
// outage interrupted, waiting to give it back.
const maxOutageWait = 5 * time.Minute
