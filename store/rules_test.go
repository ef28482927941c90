package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

func TestPageLimit(t *testing.T) {
	t.Parallel()
	require.Equal(t, store.JobListLimitDefault, (&store.JobListParams{}).PageLimit())
	require.Equal(t, store.JobListLimitDefault, (&store.JobListParams{Limit: -1}).PageLimit())
	require.Equal(t, 7, (&store.JobListParams{Limit: 7}).PageLimit())
	big := (&store.JobListParams{Limit: 1 << 40}).PageLimit()
	require.Equal(t, 1<<31-2, big, "limit+1 must fit an int32")
	require.Equal(t, store.JobEventListLimitDefault, (&store.JobEventListParams{}).PageLimit())
	require.Equal(t, store.JobChangeListLimitDefault, (&store.JobChangeListParams{}).PageLimit())
	require.Equal(t, store.IdempotencyKeyDeleteExpiredLimitDefault, (&store.IdempotencyKeyDeleteExpiredParams{}).PageLimit())
}

func TestJobListPage(t *testing.T) {
	t.Parallel()
	at := time.Unix(1700000000, 0)
	jobs := []*store.Job{{ID: "c", CreatedAt: at.Add(2)}, {ID: "b", CreatedAt: at.Add(1)}, {ID: "a", CreatedAt: at}}

	full := store.JobListPage(jobs, 2) // a third row was read: a next page
	require.Equal(t, jobs[:2], full.Jobs)
	require.Equal(t, &store.JobCursor{CreatedAt: at.Add(1), ID: "b"}, full.Next)

	last := store.JobListPage(jobs, 3) // exactly the limit: the last page
	require.Equal(t, jobs, last.Jobs)
	require.Nil(t, last.Next)

	require.Nil(t, store.JobListPage(nil, 3).Next)
}

func TestJobTransitionWrite(t *testing.T) {
	t.Parallel()
	lease := store.Lease{JobID: "j", Owner: "w", Attempt: 1}
	runAfter := time.Now()
	jobErr := &store.JobError{Code: "unavailable", Message: "503"}

	w, err := (&store.JobTransitionParams{Lease: lease, To: store.JobStatusRetryWait, RunAfter: &runAfter, Output: []byte(`{}`), Error: jobErr, Message: "backing off"}).Write()
	require.NoError(t, err)
	require.True(t, w.Parks)
	require.False(t, w.Finished)
	require.Equal(t, &runAfter, w.RunAfter)
	require.Nil(t, w.Output, "only awaiting_approval stores an output")
	require.JSONEq(t, `{"code":"unavailable","message":"503","retryable":false}`, string(w.Error))
	require.Equal(t, "backing off (unavailable: 503)", w.Message)
	require.Equal(t, "cancelled: requested while running; was to be: backing off (unavailable: 503)", w.CancelledMessage)

	w, err = (&store.JobTransitionParams{Lease: lease, To: store.JobStatusFailed, RunAfter: &runAfter}).Write()
	require.NoError(t, err)
	require.False(t, w.Parks)
	require.True(t, w.Finished)
	require.Nil(t, w.RunAfter, "only retry_wait and outcome_unknown store a due time")
	require.Nil(t, w.Error)

	w, err = (&store.JobTransitionParams{Lease: lease, To: store.JobStatusAwaitingApproval, Output: []byte(`{"plan":1}`)}).Write()
	require.NoError(t, err)
	require.True(t, w.Parks)
	require.JSONEq(t, `{"plan":1}`, string(w.Output))

	_, err = (&store.JobTransitionParams{Lease: lease, To: store.JobStatusRetryWait}).Write()
	require.ErrorContains(t, err, "needs RunAfter")
	for _, to := range []store.JobStatus{store.JobStatusQueued, store.JobStatusRunning, store.JobStatusSucceeded, ""} {
		_, err = (&store.JobTransitionParams{Lease: lease, To: to}).Write()
		require.ErrorIs(t, err, store.ErrTransitionRefused, "to %q", to)
	}
}

func TestOperatorTransitionRefuse(t *testing.T) {
	t.Parallel()
	refusal, err := store.CancelTransition.Refuse(store.JobStatusQueued)
	require.Equal(t, store.RefusalRaced, refusal)
	require.NoError(t, err)
	refusal, err = store.CancelTransition.Refuse(store.JobStatusCancelled)
	require.Equal(t, store.RefusalSettled, refusal)
	require.NoError(t, err)
	refusal, err = store.ReplayTransition.Refuse(store.JobStatusCancelled)
	require.Equal(t, store.RefusalRefused, refusal)
	var refused *store.TransitionRefusedError
	require.ErrorAs(t, err, &refused)
	require.Equal(t, store.JobStatusCancelled, refused.Status)
}

// TestDeliveryRetryRule: the rule both stores run in their transaction,
// over steps that record which statements it ran.
func TestDeliveryRetryRule(t *testing.T) {
	t.Parallel()
	type ran struct{ get, requeue, enable int }
	steps := func(r *ran, current store.DeliveryStatus) store.DeliveryRetrySteps {
		return store.DeliveryRetrySteps{
			Get: func() (*store.Delivery, error) { r.get++; return &store.Delivery{ID: 7, Status: current}, nil },
			Requeue: func() ([]*store.Delivery, error) {
				r.requeue++
				return []*store.Delivery{{ID: 7, Status: store.DeliveryStatusPending}}, nil
			},
			SinkEnable: func() (bool, error) { r.enable++; return true, nil },
		}
	}

	for _, p := range []store.DeliveryRetryParams{{}, {ID: 7, Sink: "hook"}} {
		var r ran
		_, err := p.Retry(steps(&r, store.DeliveryStatusDeadLettered))
		require.Error(t, err, "exactly one of ID and Sink: %+v", p)
		require.Equal(t, ran{}, r, "nothing ran")
	}

	var r ran
	_, err := (&store.DeliveryRetryParams{ID: 7}).Retry(steps(&r, store.DeliveryStatusDelivered))
	require.ErrorIs(t, err, store.ErrTransitionRefused)
	require.Equal(t, ran{get: 1}, r, "a delivered delivery is refused before anything is written")

	r = ran{}
	res, err := (&store.DeliveryRetryParams{ID: 7, Redeliver: true}).Retry(steps(&r, store.DeliveryStatusDelivered))
	require.NoError(t, err)
	require.Len(t, res.Deliveries, 1)
	require.Equal(t, ran{get: 1, requeue: 1}, r, "Redeliver queues a delivered one")

	r = ran{}
	res, err = (&store.DeliveryRetryParams{ID: 7}).Retry(steps(&r, store.DeliveryStatusPending))
	require.NoError(t, err)
	require.Equal(t, []*store.Delivery{{ID: 7, Status: store.DeliveryStatusPending}}, res.Deliveries)
	require.Equal(t, ran{get: 1}, r, "a pending one is answered as it is")

	r = ran{}
	res, err = (&store.DeliveryRetryParams{Sink: "hook"}).Retry(steps(&r, ""))
	require.NoError(t, err)
	require.True(t, res.SinkEnabled)
	require.Equal(t, ran{requeue: 1, enable: 1}, r, "a sink's retry requeues without a get and enables the sink")

	r = ran{}
	res, err = (&store.DeliveryRetryParams{ID: 7}).Retry(steps(&r, store.DeliveryStatusDeadLettered))
	require.NoError(t, err)
	require.False(t, res.SinkEnabled)
	require.Equal(t, ran{get: 1, requeue: 1}, r, "a retry by ID leaves sinks alone")
}
