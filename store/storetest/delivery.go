package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

func exerciseDelivery(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()

	type testBundle struct {
		store    store.Store
		engine   store.EngineStore
		operator store.OperatorStore
		delivery store.DeliveryStore
		ctx      context.Context
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		s := newStore(t)
		return &testBundle{store: s, engine: s, operator: s, delivery: s, ctx: t.Context()}
	}

	// fail submits a job, claims it and fails it: one job.failed event.
	fail := func(t *testing.T, b *testBundle, params *store.JobSubmitParams) *store.Job {
		t.Helper()
		submit(t, b.store, params)
		job := claimOne(t, b.engine, "w", engineLease)
		job, err := b.engine.JobTransition(b.ctx, &store.JobTransitionParams{
			Lease: leaseOf(job), To: store.JobStatusFailed, Error: &store.JobError{Code: "BAD", Message: "bad input"},
		})
		require.NoError(t, err)
		return job
	}

	outbox := func(t *testing.T, b *testBundle, job *store.Job) []*store.OutboxEvent {
		t.Helper()
		events, err := b.engine.OutboxList(b.ctx, &store.OutboxListParams{JobID: job.ID})
		require.NoError(t, err)
		return events
	}

	routeAll := func(t *testing.T, b *testBundle, sinks ...string) {
		t.Helper()
		for {
			n, err := b.delivery.OutboxRoute(b.ctx, &store.OutboxRouteParams{Route: func(*store.OutboxEvent) []string { return sinks }})
			require.NoError(t, err)
			if n == 0 {
				return
			}
		}
	}

	claim := func(t *testing.T, b *testBundle, owner string, lease time.Duration, sinks ...string) []*store.Delivery {
		t.Helper()
		ds, err := b.delivery.DeliveryClaim(b.ctx, &store.DeliveryClaimParams{Owner: owner, Sinks: sinks, Limit: 100, LeaseDuration: lease})
		require.NoError(t, err)
		return ds
	}

	settle := func(t *testing.T, b *testBundle, owner string, d *store.Delivery, status store.DeliveryStatus, outcome store.DeliveryOutcome) *store.DeliverySettleResult {
		t.Helper()
		now := time.Now()
		res, err := b.delivery.DeliverySettle(b.ctx, &store.DeliverySettleParams{Owner: owner, Results: []store.DeliveryResult{{
			DeliveryID: d.ID, EventID: d.EventID, Sink: d.Sink, Tenant: d.Tenant, Attempt: d.Attempt,
			Outcome: outcome, Status: status, DueAt: now, HTTPStatus: 200, ExternalRef: "ref-" + d.EventID,
			StartedAt: now.Add(-5 * time.Millisecond), FinishedAt: now,
		}}})
		require.NoError(t, err)
		return res
	}

	t.Run("Events", func(t *testing.T) {
		t.Parallel()

		t.Run("EnvelopeOfAFailure", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			job := fail(t, b, newSubmitParams(t))

			events := outbox(t, b, job)
			require.Len(t, events, 1)
			e := events[0]
			require.Equal(t, "job:"+job.ID+":job.failed:0", e.EventID)
			require.Equal(t, "job.failed", e.EventType)
			require.Equal(t, job.Tenant, e.Tenant)
			require.Equal(t, job.Pipeline, e.Pipeline)
			require.Nil(t, e.RoutedAt)

			var env struct {
				Version int    `json:"version"`
				Type    string `json:"type"`
				ID      string `json:"id"`
				Time    string `json:"time"`
				Data    struct {
					JobID           string          `json:"job_id"`
					Tenant          string          `json:"tenant"`
					Pipeline        string          `json:"pipeline"`
					PipelineVersion int32           `json:"pipeline_version"`
					PromptVersion   string          `json:"prompt_version"`
					ModelProfile    string          `json:"model_profile"`
					Generation      int             `json:"generation"`
					Status          string          `json:"status"`
					Output          json.RawMessage `json:"output"`
					Error           *store.JobError `json:"error"`
					Usage           map[string]int  `json:"usage"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal(e.Payload, &env))
			require.Equal(t, 1, env.Version)
			require.Equal(t, "job.failed", env.Type)
			require.Equal(t, e.EventID, env.ID)
			at, err := time.Parse(time.RFC3339Nano, env.Time)
			require.NoError(t, err, env.Time)
			require.WithinDuration(t, job.UpdatedAt, at, time.Millisecond)
			require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`, env.Time)
			require.Equal(t, job.ID, env.Data.JobID)
			require.Equal(t, job.Tenant, env.Data.Tenant)
			require.Equal(t, job.Pipeline, env.Data.Pipeline)
			require.Equal(t, job.PipelineVersion, env.Data.PipelineVersion)
			require.Equal(t, job.PromptVersion, env.Data.PromptVersion)
			require.Equal(t, job.ModelProfile, env.Data.ModelProfile)
			require.Equal(t, "failed", env.Data.Status)
			require.Equal(t, "null", string(env.Data.Output))
			require.Equal(t, &store.JobError{Code: "BAD", Message: "bad input"}, env.Data.Error)
			require.Contains(t, env.Data.Usage, "prompt_tokens")

			// The bytes are fixed: read again, the same.
			require.Equal(t, e.Payload, outbox(t, b, job)[0].Payload)
		})

		t.Run("SuccessCarriesOutputAndReplayStartsAGeneration", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			job := fail(t, b, newSubmitParams(t))
			_, err := b.operator.JobReplay(b.ctx, &store.JobReplayParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			claimed := claimOne(t, b.engine, "w", engineLease)
			_, err = Publish(b.ctx, b.engine, &store.JobPublishParams{Lease: leaseOf(claimed), Output: []byte(`{"total": 42}`), Message: "published"})
			require.NoError(t, err)

			events := outbox(t, b, job)
			require.Len(t, events, 2)
			require.Equal(t, "job:"+job.ID+":job.failed:0", events[0].EventID)
			require.Equal(t, "job:"+job.ID+":job.succeeded:1", events[1].EventID)
			var env struct {
				Data struct {
					Generation int             `json:"generation"`
					Output     json.RawMessage `json:"output"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal(events[1].Payload, &env))
			require.Equal(t, 1, env.Data.Generation)
			require.JSONEq(t, `{"total": 42}`, string(env.Data.Output))
		})

		t.Run("EveryAnnouncedTransition", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			for _, to := range []store.JobStatus{store.JobStatusDeadLettered, store.JobStatusAwaitingApproval, store.JobStatusOutcomeUnknown, store.JobStatusCancelled, store.JobStatusRetryWait} {
				submit(t, b.store, newSubmitParams(t))
				job := claimOne(t, b.engine, "w", engineLease)
				runAfter := time.Now().Add(time.Hour)
				_, err := b.engine.JobTransition(b.ctx, &store.JobTransitionParams{Lease: leaseOf(job), To: to, RunAfter: &runAfter, Output: []byte(`{}`)})
				require.NoError(t, err)
				events := outbox(t, b, job)
				if to == store.JobStatusRetryWait {
					require.Empty(t, events, "retry_wait is not announced")
					continue
				}
				require.Len(t, events, 1, to)
				require.Equal(t, "job."+string(to), events[0].EventType)
			}
			// An operator's cancel announces too.
			queued := submit(t, b.store, newSubmitParams(t))
			_, err := b.operator.JobCancel(b.ctx, &store.JobCancelParams{Tenant: queued.Tenant, ID: queued.ID})
			require.NoError(t, err)
			require.Equal(t, "job.cancelled", outbox(t, b, queued)[0].EventType)
		})
	})

	t.Run("Route", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := fail(t, b, newSubmitParams(t))
		other := newSubmitParams(t)
		other.Tenant = "tenant-b"
		c := fail(t, b, other)

		var seen []string
		n, err := b.delivery.OutboxRoute(b.ctx, &store.OutboxRouteParams{Route: func(e *store.OutboxEvent) []string {
			seen = append(seen, e.EventID)
			if e.Tenant == "tenant-b" {
				return nil
			}
			return []string{"hook", "chat"}
		}})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.Len(t, seen, 2)
		n, err = b.delivery.OutboxRoute(b.ctx, &store.OutboxRouteParams{Route: func(*store.OutboxEvent) []string { return []string{"hook"} }})
		require.NoError(t, err)
		require.Zero(t, n, "routed once")
		require.NotNil(t, outbox(t, b, c)[0].RoutedAt)

		res, err := b.delivery.DeliveryList(b.ctx, &store.DeliveryListParams{Tenant: "tenant-a"})
		require.NoError(t, err)
		require.Len(t, res.Deliveries, 2)
		for _, d := range res.Deliveries {
			require.Equal(t, a.ID, d.JobID)
			require.Equal(t, store.DeliveryStatusPending, d.Status)
		}
		res, err = b.delivery.DeliveryList(b.ctx, &store.DeliveryListParams{Tenant: "tenant-b"})
		require.NoError(t, err)
		require.Empty(t, res.Deliveries)
	})

	t.Run("Claim", func(t *testing.T) {
		t.Parallel()

		t.Run("PerJobOrderAndSinkFilter", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			job := fail(t, b, newSubmitParams(t))
			_, err := b.operator.JobReplay(b.ctx, &store.JobReplayParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			claimed := claimOne(t, b.engine, "w", engineLease)
			_, err = b.engine.JobTransition(b.ctx, &store.JobTransitionParams{Lease: leaseOf(claimed), To: store.JobStatusDeadLettered})
			require.NoError(t, err)
			routeAll(t, b, "hook")

			require.Empty(t, claim(t, b, "r1", time.Minute, "other"), "a relay claims only its sinks")
			first := claim(t, b, "r1", time.Minute, "hook")
			require.Len(t, first, 1, "the second event waits for the first")
			require.Equal(t, "job.failed", first[0].EventType)
			require.EqualValues(t, 1, first[0].Attempt)
			require.NotEmpty(t, first[0].Payload)
			require.Empty(t, claim(t, b, "r2", time.Minute, "hook"), "held, and the next one waits")

			require.Empty(t, settle(t, b, "r1", first[0], store.DeliveryStatusDelivered, store.DeliveryOutcomeDelivered).LeaseLost)
			second := claim(t, b, "r2", time.Minute, "hook")
			require.Len(t, second, 1)
			require.Equal(t, "job.dead_lettered", second[0].EventType)
		})

		t.Run("ConcurrentClaimersClaimEachOnce", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			const jobs = 40
			for range jobs {
				fail(t, b, newSubmitParams(t))
			}
			routeAll(t, b, "hook")
			var mu sync.Mutex
			seen := map[int64]int{}
			var wg sync.WaitGroup
			for i := range 6 {
				wg.Go(func() {
					for range 20 {
						ds, err := b.delivery.DeliveryClaim(b.ctx, &store.DeliveryClaimParams{Owner: fmt.Sprint("r", i), Sinks: []string{"hook"}, Limit: 3, LeaseDuration: time.Minute})
						if !assertNoError(t, err) {
							return
						}
						mu.Lock()
						for _, d := range ds {
							seen[d.ID]++
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			require.Len(t, seen, jobs)
			for id, n := range seen {
				require.Equal(t, 1, n, "delivery %d claimed %d times", id, n)
			}
		})

		t.Run("TakeoverFencesTheStaleRelay", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			fail(t, b, newSubmitParams(t))
			routeAll(t, b, "hook")
			stale := claim(t, b, "r1", 50*time.Millisecond, "hook")
			require.Len(t, stale, 1)
			var taken []*store.Delivery
			require.Eventually(t, func() bool {
				taken = claim(t, b, "r2", time.Minute, "hook")
				return len(taken) == 1
			}, 10*time.Second, 20*time.Millisecond)
			require.EqualValues(t, 2, taken[0].Attempt)

			res := settle(t, b, "r1", stale[0], store.DeliveryStatusDelivered, store.DeliveryOutcomeDelivered)
			require.Equal(t, []int64{stale[0].ID}, res.LeaseLost)
			list, err := b.delivery.DeliveryList(b.ctx, &store.DeliveryListParams{Tenant: "tenant-a"})
			require.NoError(t, err)
			require.Equal(t, store.DeliveryStatusPending, list.Deliveries[0].Status, "the stale relay marked nothing")
			journal, err := b.delivery.DeliveryAttemptList(b.ctx, &store.DeliveryAttemptListParams{DeliveryID: stale[0].ID})
			require.NoError(t, err)
			require.Len(t, journal, 1, "but its attempt is journaled")
			require.Equal(t, "r1", journal[0].Relay)

			require.Empty(t, settle(t, b, "r2", taken[0], store.DeliveryStatusDelivered, store.DeliveryOutcomeDelivered).LeaseLost)
			list, err = b.delivery.DeliveryList(b.ctx, &store.DeliveryListParams{Tenant: "tenant-a"})
			require.NoError(t, err)
			d := list.Deliveries[0]
			require.Equal(t, store.DeliveryStatusDelivered, d.Status)
			require.Equal(t, "ref-"+d.EventID, d.ExternalRef)
			require.NotNil(t, d.DeliveredAt)
			journal, err = b.delivery.DeliveryAttemptList(b.ctx, &store.DeliveryAttemptListParams{DeliveryID: d.ID})
			require.NoError(t, err)
			require.Len(t, journal, 2)
			require.Equal(t, store.DeliveryOutcomeDelivered, journal[1].Outcome)
			require.EqualValues(t, 200, journal[1].HTTPStatus)
			require.EqualValues(t, 2, journal[1].Attempt)
		})

		t.Run("DisabledSinkWaits", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			fail(t, b, newSubmitParams(t))
			routeAll(t, b, "hook")
			require.NoError(t, b.delivery.SinkDisable(b.ctx, &store.SinkDisableParams{Sink: "hook", Tenant: "tenant-a", Reason: "410 Gone"}))
			require.NoError(t, b.delivery.SinkDisable(b.ctx, &store.SinkDisableParams{Sink: "hook", Tenant: "tenant-a", Reason: "again"}))
			require.Empty(t, claim(t, b, "r1", time.Minute, "hook"))
			states, err := b.delivery.SinkStateList(b.ctx, &store.SinkStateListParams{Tenant: "tenant-a"})
			require.NoError(t, err)
			require.Len(t, states, 1)
			require.Equal(t, "410 Gone", states[0].Reason)
			states, err = b.delivery.SinkStateList(b.ctx, &store.SinkStateListParams{Tenant: "tenant-b"})
			require.NoError(t, err)
			require.Empty(t, states)

			res, err := b.delivery.DeliveryRetry(b.ctx, &store.DeliveryRetryParams{Tenant: "tenant-a", Sink: "hook"})
			require.NoError(t, err)
			require.True(t, res.SinkEnabled)
			require.Len(t, claim(t, b, "r1", time.Minute, "hook"), 1)
		})
	})

	t.Run("ListAndRetry", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for range 5 {
			fail(t, b, newSubmitParams(t))
		}
		routeAll(t, b, "hook")
		ds := claim(t, b, "r1", time.Minute, "hook")
		require.Len(t, ds, 5)
		settle(t, b, "r1", ds[0], store.DeliveryStatusDelivered, store.DeliveryOutcomeDelivered)
		settle(t, b, "r1", ds[1], store.DeliveryStatusDeadLettered, store.DeliveryOutcomeDeadLettered)
		settle(t, b, "r1", ds[2], store.DeliveryStatusDeadLettered, store.DeliveryOutcomeDeadLettered)
		settle(t, b, "r1", ds[3], store.DeliveryStatusPending, store.DeliveryOutcomeUnknown)

		// Dead letters first, newest first, two a page.
		var got []int64
		var statuses []store.DeliveryStatus
		var after *store.DeliveryCursor
		for {
			page, err := b.delivery.DeliveryList(b.ctx, &store.DeliveryListParams{Tenant: "tenant-a", Limit: 2, After: after})
			require.NoError(t, err)
			for _, d := range page.Deliveries {
				got = append(got, d.ID)
				statuses = append(statuses, d.Status)
			}
			if page.Next == nil {
				break
			}
			after = page.Next
		}
		require.Len(t, got, 5)
		require.Equal(t, []store.DeliveryStatus{"dead_lettered", "dead_lettered", "pending", "pending", "delivered"}, statuses)
		require.True(t, got[0] > got[1] && got[2] > got[3], "newest first within a status")

		unknown, err := b.delivery.DeliveryList(b.ctx, &store.DeliveryListParams{AllTenants: true, LastOutcome: store.DeliveryOutcomeUnknown})
		require.NoError(t, err)
		require.Len(t, unknown.Deliveries, 1)
		require.Equal(t, ds[3].ID, unknown.Deliveries[0].ID)
		byJob, err := b.delivery.DeliveryList(b.ctx, &store.DeliveryListParams{Tenant: "tenant-a", JobID: ds[0].JobID})
		require.NoError(t, err)
		require.Len(t, byJob.Deliveries, 1)
		none, err := b.delivery.DeliveryList(b.ctx, &store.DeliveryListParams{Tenant: "tenant-b"})
		require.NoError(t, err)
		require.Empty(t, none.Deliveries)

		// Retry one dead letter: pending, due now, a fresh budget.
		res, err := b.delivery.DeliveryRetry(b.ctx, &store.DeliveryRetryParams{Tenant: "tenant-a", ID: ds[1].ID})
		require.NoError(t, err)
		require.Len(t, res.Deliveries, 1)
		require.Equal(t, store.DeliveryStatusPending, res.Deliveries[0].Status)
		require.Zero(t, res.Deliveries[0].Attempts)
		// Again: already pending, returned as it is.
		res, err = b.delivery.DeliveryRetry(b.ctx, &store.DeliveryRetryParams{Tenant: "tenant-a", ID: ds[1].ID})
		require.NoError(t, err)
		require.Equal(t, store.DeliveryStatusPending, res.Deliveries[0].Status)
		_, err = b.delivery.DeliveryRetry(b.ctx, &store.DeliveryRetryParams{Tenant: "tenant-a", ID: ds[0].ID})
		var refused *store.DeliveryRefusedError
		require.ErrorAs(t, err, &refused)
		require.ErrorIs(t, err, store.ErrTransitionRefused)
		_, err = b.delivery.DeliveryRetry(b.ctx, &store.DeliveryRetryParams{Tenant: "tenant-b", ID: ds[2].ID})
		require.ErrorIs(t, err, store.ErrNotFound)
		// The sink's remaining dead letter.
		res, err = b.delivery.DeliveryRetry(b.ctx, &store.DeliveryRetryParams{Tenant: "tenant-a", Sink: "hook"})
		require.NoError(t, err)
		require.Len(t, res.Deliveries, 1)
		require.Equal(t, ds[2].ID, res.Deliveries[0].ID)
		require.False(t, res.SinkEnabled)
		claimedAgain := claim(t, b, "r2", time.Minute, "hook")
		ids := []int64{}
		for _, d := range claimedAgain {
			ids = append(ids, d.ID)
		}
		require.True(t, slices.Contains(ids, ds[1].ID) && slices.Contains(ids, ds[2].ID), "retried deliveries are due")
	})

	t.Run("MultiSink", func(t *testing.T) { exerciseMultiSink(t, newStore) })

	t.Run("SentMessages", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.delivery.SentMessageGet(b.ctx, &store.SentMessageGetParams{Sink: "chat", ContentHash: "h1", SentAfter: time.Now().Add(-time.Hour)})
		require.ErrorIs(t, err, store.ErrNotFound)
		require.NoError(t, b.delivery.SentMessageRecord(b.ctx, &store.SentMessageRecordParams{Message: store.SentMessage{Sink: "chat", ContentHash: "h1", EventID: "e1", ExternalRef: "m1"}}))
		m, err := b.delivery.SentMessageGet(b.ctx, &store.SentMessageGetParams{Sink: "chat", ContentHash: "h1", SentAfter: time.Now().Add(-time.Hour)})
		require.NoError(t, err)
		require.Equal(t, "m1", m.ExternalRef)
		require.Equal(t, "e1", m.EventID)
		_, err = b.delivery.SentMessageGet(b.ctx, &store.SentMessageGetParams{Sink: "chat", ContentHash: "h1", SentAfter: time.Now().Add(time.Hour)})
		require.ErrorIs(t, err, store.ErrNotFound, "past its TTL a record does not count")
		_, err = b.delivery.SentMessageGet(b.ctx, &store.SentMessageGetParams{Sink: "other", ContentHash: "h1", SentAfter: time.Now().Add(-time.Hour)})
		require.ErrorIs(t, err, store.ErrNotFound)
	})
}

// assertNoError is require.NoError for goroutines other than the test's.
func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}
