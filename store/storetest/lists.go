package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// listSizes are the sizes every list a store method takes is exercised
// with: none, one, many. A list of one hides what a list of several breaks
// (issue 19: a claim of two sinks failed on SQLite, while every test
// claimed one).
var listSizes = []int{0, 1, 3}

// exerciseLists calls each store method that takes a list - or a map -
// with 0, 1 and 3 values and checks that each value was taken, no more.
func exerciseLists(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()

	// each runs check once per size, in subtests of one store.
	each := func(t *testing.T, check func(t *testing.T, s Store, n int)) {
		t.Helper()
		t.Parallel()
		s := newStore(t)
		for _, n := range listSizes {
			t.Run(fmt.Sprint(n), func(t *testing.T) { check(t, s, n) })
		}
	}
	claimN := func(t *testing.T, s Store, n int) []*store.Job {
		t.Helper()
		for range n {
			submit(t, s, newSubmitParams(t))
		}
		jobs, err := s.JobClaim(t.Context(), &store.JobClaimParams{Owner: "w", Limit: 10, LeaseDuration: engineLease})
		require.NoError(t, err)
		require.Len(t, jobs, n)
		return jobs
	}
	chunks := func(tag string, n int) []store.StageCheckpoint {
		cps := make([]store.StageCheckpoint, n)
		for i := range cps {
			cps[i] = store.StageCheckpoint{Stage: store.JobStageLLMDone, Chunk: int32(i), StageKey: fmt.Sprintf("stage:v1:%s-%d", tag, i), CodeVersion: "1", Output: []byte(fmt.Sprintf(`{"chunk":%d}`, i))}
		}
		return cps
	}
	// failed makes a job announce job.failed: one unrouted event.
	failed := func(t *testing.T, s Store) *store.Job {
		t.Helper()
		submit(t, s, newSubmitParams(t))
		job := claimOne(t, s, "w", engineLease)
		job, err := s.JobTransition(t.Context(), &store.JobTransitionParams{Lease: leaseOf(job), To: store.JobStatusFailed, Error: &store.JobError{Code: "BAD", Message: "bad"}})
		require.NoError(t, err)
		return job
	}
	sinkNames := func(prefix string, n int) []string {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("%s-%d", prefix, i)
		}
		return names
	}
	deliveriesOf := func(t *testing.T, s Store, job *store.Job) []*store.Delivery {
		t.Helper()
		list, err := s.DeliveryList(t.Context(), &store.DeliveryListParams{Tenant: job.Tenant, JobID: job.ID})
		require.NoError(t, err)
		return list.Deliveries
	}

	t.Run("JobSubmitMany", func(t *testing.T) {
		each(t, func(t *testing.T, s Store, n int) {
			jobs := make([]*store.JobSubmitParams, n)
			for i := range jobs {
				jobs[i] = newSubmitParams(t)
				jobs[i].Tenant = fmt.Sprint("tenant-many-", n)
			}
			res, err := s.JobSubmitMany(t.Context(), &store.JobSubmitManyParams{Jobs: jobs})
			require.NoError(t, err)
			require.Len(t, res.Items, n)
			for i, item := range res.Items {
				require.NoError(t, item.Err)
				require.Equal(t, store.OutcomeCreated, item.Outcome)
				require.Equal(t, jobs[i].ID, item.Job.ID)
			}
			list, err := s.JobList(t.Context(), &store.JobListParams{Tenant: fmt.Sprint("tenant-many-", n)})
			require.NoError(t, err)
			require.Len(t, list.Jobs, n)
		})
	})

	t.Run("JobSubmitLabels", func(t *testing.T) {
		each(t, func(t *testing.T, s Store, n int) {
			params := newSubmitParams(t)
			params.Labels = map[string]string{}
			for i := range n {
				params.Labels[fmt.Sprint("k", i)] = fmt.Sprint("v", i)
			}
			job := submit(t, s, params)
			got, err := s.JobGetByID(t.Context(), &store.JobGetByIDParams{Tenant: job.Tenant, ID: job.ID})
			require.NoError(t, err)
			require.Len(t, got.Labels, n)
			for k, v := range params.Labels {
				require.Equal(t, v, got.Labels[k])
			}
		})
	})

	t.Run("RunItemGetMany", func(t *testing.T) {
		each(t, func(t *testing.T, s Store, n int) {
			key := newUUID(t)
			run, err := s.RunCreate(t.Context(), &store.RunCreateParams{
				ID: newUUID(t), Tenant: "tenant-a", IdempotencyKey: "run-" + key, Fingerprint: "fp-" + key,
				Name: "lists", Pipeline: "invoice", Params: []byte(`{}`),
			})
			require.NoError(t, err)
			items := make([]*store.JobSubmitParams, 3)
			for i := range items {
				items[i] = newSubmitParams(t)
				items[i].RunID = run.Run.ID
			}
			_, err = s.JobSubmitMany(t.Context(), &store.JobSubmitManyParams{Jobs: items})
			require.NoError(t, err)
			keys := []string{}
			for _, it := range items[:n] {
				keys = append(keys, it.IdempotencyKey)
			}
			found, err := s.RunItemGetMany(t.Context(), &store.RunItemGetManyParams{Tenant: "tenant-a", RunID: run.Run.ID, Keys: append(keys, "not-in-run")})
			require.NoError(t, err)
			require.Len(t, found, n)
			for i, it := range found {
				require.Contains(t, keys, it.Key, "item %d", i)
			}
		})
	})

	t.Run("JobHeartbeatMany", func(t *testing.T) {
		each(t, func(t *testing.T, s Store, n int) {
			jobs := claimN(t, s, n)
			leases := make([]store.Lease, n)
			stale := make([]store.Lease, n)
			for i, j := range jobs {
				leases[i] = leaseOf(j)
				stale[i] = store.Lease{JobID: j.ID, Owner: j.LeaseOwner, Attempt: j.Attempt + 1}
			}
			res, err := s.JobHeartbeatMany(t.Context(), &store.JobHeartbeatManyParams{Leases: leases, LeaseDuration: engineLease})
			require.NoError(t, err)
			require.Empty(t, res.Lost)
			require.Empty(t, res.CancelRequested)
			res, err = s.JobHeartbeatMany(t.Context(), &store.JobHeartbeatManyParams{Leases: stale, LeaseDuration: engineLease})
			require.NoError(t, err)
			require.ElementsMatch(t, stale, res.Lost, "every lease not held is lost")
			for _, j := range jobs { // settle them: the next size claims its own
				_, err := s.JobTransition(t.Context(), &store.JobTransitionParams{Lease: leaseOf(j), To: store.JobStatusFailed})
				require.NoError(t, err)
			}
		})
	})

	t.Run("CheckpointWriteMany", func(t *testing.T) {
		each(t, func(t *testing.T, s Store, n int) {
			job := claimN(t, s, 1)[0]
			err := s.CheckpointWriteMany(t.Context(), &store.CheckpointWriteManyParams{Lease: leaseOf(job), Checkpoints: chunks(job.ID, n)})
			require.NoError(t, err)
			cps, err := s.CheckpointList(t.Context(), &store.CheckpointListParams{JobID: job.ID})
			require.NoError(t, err)
			require.Len(t, cps, n)
			for i, cp := range cps {
				require.EqualValues(t, i, cp.Chunk)
			}
			_, err = s.JobTransition(t.Context(), &store.JobTransitionParams{Lease: leaseOf(job), To: store.JobStatusFailed})
			require.NoError(t, err)
		})
	})

	t.Run("CheckpointGetByStageKeys", func(t *testing.T) {
		each(t, func(t *testing.T, s Store, n int) {
			job := claimN(t, s, 1)[0]
			written := chunks(job.ID, 3)
			require.NoError(t, s.CheckpointWriteMany(t.Context(), &store.CheckpointWriteManyParams{Lease: leaseOf(job), Checkpoints: written}))
			keys := []string{"stage:v1:absent"}
			for _, cp := range written[:n] {
				keys = append(keys, cp.StageKey)
			}
			found, err := s.CheckpointGetByStageKeys(t.Context(), &store.CheckpointGetByStageKeysParams{Tenant: job.Tenant, StageKeys: keys[1:]})
			require.NoError(t, err)
			require.Len(t, found.Checkpoints, n)
			for _, cp := range written[:n] {
				require.Equal(t, cp.Chunk, found.Checkpoints[cp.StageKey].Chunk)
			}
			found, err = s.CheckpointGetByStageKeys(t.Context(), &store.CheckpointGetByStageKeysParams{Tenant: job.Tenant, StageKeys: keys})
			require.NoError(t, err)
			require.Len(t, found.Checkpoints, n, "a key without a checkpoint is absent")
			_, err = s.JobTransition(t.Context(), &store.JobTransitionParams{Lease: leaseOf(job), To: store.JobStatusFailed})
			require.NoError(t, err)
		})
	})

	t.Run("JobPublishMany", func(t *testing.T) {
		each(t, func(t *testing.T, s Store, n int) {
			jobs := claimN(t, s, n)
			params := &store.JobPublishManyParams{}
			for _, j := range jobs {
				params.Jobs = append(params.Jobs, &store.JobPublishParams{Lease: leaseOf(j), Output: []byte(`{"n":1}`), Message: "published", Checkpoints: chunks(j.ID, n)})
			}
			res, err := s.JobPublishMany(t.Context(), params)
			require.NoError(t, err)
			require.Len(t, res.Items, n)
			for i, item := range res.Items {
				require.NoError(t, item.Err)
				require.Equal(t, jobs[i].ID, item.Job.ID)
				require.Equal(t, store.JobStatusSucceeded, item.Job.Status)
				cps, err := s.CheckpointList(t.Context(), &store.CheckpointListParams{JobID: item.Job.ID})
				require.NoError(t, err)
				require.Len(t, cps, n, "each job's checkpoints")
			}
		})
	})

	t.Run("OutboxRoute", func(t *testing.T) {
		each(t, func(t *testing.T, s Store, n int) {
			job := failed(t, s)
			sinks := sinkNames(fmt.Sprint("route", n), n)
			routed, err := s.OutboxRoute(t.Context(), &store.OutboxRouteParams{Route: func(*store.OutboxEvent) []string { return sinks }})
			require.NoError(t, err)
			require.Equal(t, 1, routed)
			var got []string
			for _, d := range deliveriesOf(t, s, job) {
				got = append(got, d.Sink)
			}
			require.ElementsMatch(t, sinks, got, "one delivery per sink")
			events, err := s.OutboxList(t.Context(), &store.OutboxListParams{JobID: job.ID})
			require.NoError(t, err)
			require.NotNil(t, events[0].RoutedAt, "an event of no sink is routed too")
		})
	})

	t.Run("DeliveryClaim", func(t *testing.T) {
		each(t, func(t *testing.T, s Store, n int) {
			job := failed(t, s)
			sinks := sinkNames(fmt.Sprint("claim", n), 3)
			_, err := s.OutboxRoute(t.Context(), &store.OutboxRouteParams{Route: func(*store.OutboxEvent) []string { return sinks }})
			require.NoError(t, err)
			ds, err := s.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Owner: "r", Sinks: sinks[:n], Limit: 10, LeaseDuration: time.Minute})
			require.NoError(t, err)
			var got []string
			for _, d := range ds {
				require.Equal(t, job.ID, d.JobID)
				got = append(got, d.Sink)
			}
			require.ElementsMatch(t, sinks[:n], got, "the deliveries of the sinks claimed, no other")
		})
	})

	t.Run("DeliverySettle", func(t *testing.T) {
		each(t, func(t *testing.T, s Store, n int) {
			job := failed(t, s)
			sinks := sinkNames(fmt.Sprint("settle", n), 3)
			_, err := s.OutboxRoute(t.Context(), &store.OutboxRouteParams{Route: func(*store.OutboxEvent) []string { return sinks }})
			require.NoError(t, err)
			ds, err := s.DeliveryClaim(t.Context(), &store.DeliveryClaimParams{Owner: "r", Sinks: sinks, Limit: 10, LeaseDuration: time.Minute})
			require.NoError(t, err)
			require.Len(t, ds, 3)
			now := time.Now()
			results := make([]store.DeliveryResult, n)
			for i, d := range ds[:n] {
				results[i] = store.DeliveryResult{
					DeliveryID: d.ID, EventID: d.EventID, Sink: d.Sink, Tenant: d.Tenant, Attempt: d.Attempt,
					Outcome: store.DeliveryOutcomeDelivered, Status: store.DeliveryStatusDelivered, DueAt: now,
					ExternalRef: "ref-" + d.Sink, StartedAt: now, FinishedAt: now,
				}
			}
			res, err := s.DeliverySettle(t.Context(), &store.DeliverySettleParams{Owner: "r", Results: results})
			require.NoError(t, err)
			require.Empty(t, res.LeaseLost)
			settled := map[int64]bool{}
			for _, r := range results {
				settled[r.DeliveryID] = true
			}
			for _, d := range deliveriesOf(t, s, job) {
				if settled[d.ID] {
					require.Equal(t, store.DeliveryStatusDelivered, d.Status)
					require.Equal(t, "ref-"+d.Sink, d.ExternalRef)
				} else {
					require.Equal(t, store.DeliveryStatusPending, d.Status, "a delivery not in the results is left alone")
				}
				journal, err := s.DeliveryAttemptList(t.Context(), &store.DeliveryAttemptListParams{DeliveryID: d.ID})
				require.NoError(t, err)
				if settled[d.ID] {
					require.Len(t, journal, 1)
				} else {
					require.Empty(t, journal)
				}
			}
		})
	})
}
