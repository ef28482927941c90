package store_test

import (
	"context"
	"errors"
	"strconv"
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

// TestListPages: every list's page is the rows up to the limit, and a next
// cursor only when a row beyond them was read, after the page's last.
func TestListPages(t *testing.T) {
	t.Parallel()
	at := time.Unix(1700000000, 0)

	runs := []*store.Run{{ID: "c", CreatedAt: at.Add(2)}, {ID: "b", CreatedAt: at.Add(1)}, {ID: "a", CreatedAt: at}}
	full := store.RunListPage(runs, 2)
	require.Equal(t, runs[:2], full.Runs)
	require.Equal(t, &store.JobCursor{CreatedAt: at.Add(1), ID: "b"}, full.Next)
	require.Nil(t, store.RunListPage(runs, 3).Next)

	ds := []*store.Delivery{{ID: 9, Status: store.DeliveryStatusPending}, {ID: 8, Status: store.DeliveryStatusDeadLettered}, {ID: 7}}
	dpage := store.DeliveryListPage(ds, 2)
	require.Equal(t, ds[:2], dpage.Deliveries)
	require.Equal(t, &store.DeliveryCursor{Rank: store.DeliveryRank(store.DeliveryStatusDeadLettered), ID: 8}, dpage.Next)
	require.Nil(t, store.DeliveryListPage(ds, 3).Next)

	// Schedules cost a read each (their slots): only the page's rows are read.
	var read []int
	readRow := func(i int) (*store.Schedule, error) {
		read = append(read, i)
		return &store.Schedule{ID: strconv.Itoa(i), CreatedAt: at.Add(time.Duration(-i))}, nil
	}
	spage, err := store.ScheduleListPage([]int{1, 2, 3}, 2, readRow)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, read, "the probe row is not read")
	require.Len(t, spage.Schedules, 2)
	require.Equal(t, &store.JobCursor{CreatedAt: at.Add(-2), ID: "2"}, spage.Next)

	read = nil
	spage, err = store.ScheduleListPage([]int{1, 2}, 2, readRow)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, read)
	require.Nil(t, spage.Next, "exactly the limit: the last page")

	failed := errors.New("slots")
	_, err = store.ScheduleListPage([]int{1}, 2, func(int) (*store.Schedule, error) { return nil, failed })
	require.ErrorIs(t, err, failed)
}

// TestJobEventListPage: an empty page asks whether the job exists, and is
// ErrNotFound when it does not; a page with events asks nothing.
func TestJobEventListPage(t *testing.T) {
	t.Parallel()
	asked := 0
	exists := func(ok bool) func() (bool, error) {
		return func() (bool, error) { asked++; return ok, nil }
	}
	events := []*store.JobEvent{{Seq: 1}}
	got, err := store.JobEventListPage(events, exists(false))
	require.NoError(t, err)
	require.Equal(t, events, got)
	require.Zero(t, asked)

	got, err = store.JobEventListPage([]*store.JobEvent{}, exists(true))
	require.NoError(t, err)
	require.Empty(t, got, "no new events of a job that exists")
	require.Equal(t, 1, asked)

	_, err = store.JobEventListPage(nil, exists(false))
	require.ErrorIs(t, err, store.ErrNotFound)

	failed := errors.New("exists")
	_, err = store.JobEventListPage(nil, func() (bool, error) { return false, failed })
	require.ErrorIs(t, err, failed)
}

// TestNewJobChange: a change carries its job without the output.
func TestNewJobChange(t *testing.T) {
	t.Parallel()
	job := &store.Job{ID: "j", Output: []byte(`{"a":1}`)}
	c := store.NewJobChange(store.JobChangeCursor{Tx: 3, ID: 4}, &store.JobEvent{Seq: 2}, job, 300)
	require.Equal(t, store.JobChangeCursor{Tx: 3, ID: 4}, c.Cursor)
	require.Equal(t, &store.JobEvent{Seq: 2}, c.Event)
	require.Equal(t, "j", c.Job.ID)
	require.Nil(t, c.Job.Output)
}

// TestJobSubmitter: JobSubmit is one round of JobSubmitMany over the
// store's Distinct, its item's error or job the answer.
func TestJobSubmitter(t *testing.T) {
	t.Parallel()
	var calls [][]*store.JobSubmitParams
	j := store.JobSubmitter{Distinct: func(_ context.Context, jobs []*store.JobSubmitParams) ([]store.JobSubmitItem, error) {
		calls = append(calls, jobs)
		items := make([]store.JobSubmitItem, len(jobs))
		for i, p := range jobs {
			if p.IdempotencyKey == "bad" {
				items[i].Err = store.ErrIdempotencyKeyReused
				continue
			}
			items[i] = store.JobSubmitItem{Job: &store.Job{ID: p.IdempotencyKey}, Outcome: store.OutcomeCreated}
		}
		return items, nil
	}}
	res, err := j.JobSubmit(t.Context(), &store.JobSubmitParams{Tenant: "t", IdempotencyKey: "k"})
	require.NoError(t, err)
	require.Equal(t, "k", res.Job.ID)
	require.Equal(t, store.OutcomeCreated, res.Outcome)
	require.Len(t, calls, 1)

	_, err = j.JobSubmit(t.Context(), &store.JobSubmitParams{Tenant: "t", IdempotencyKey: "bad"})
	require.ErrorIs(t, err, store.ErrIdempotencyKeyReused)

	many, err := j.JobSubmitMany(t.Context(), &store.JobSubmitManyParams{Jobs: []*store.JobSubmitParams{
		{Tenant: "t", IdempotencyKey: "x"}, {Tenant: "t", IdempotencyKey: "y"},
	}})
	require.NoError(t, err)
	require.Len(t, many.Items, 2)
	require.Len(t, calls, 3, "distinct intents: one round")
}
