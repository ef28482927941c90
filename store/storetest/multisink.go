package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// exerciseMultiSink routes two tenants' events to three sinks - two of
// tenant-a (one of them disabled), one of tenant-b - and has two relays
// claim all three at once in batches of random size, settling some attempts
// as unknown outcomes to be retried: every event reaches each enabled sink
// of its tenant, delivered once, each job's events claimed in order per
// sink; the disabled sink's wait, and go out in order once it is enabled
// again. (A claim of two or more sinks is what broke on SQLite in issue 19.)
func exerciseMultiSink(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))

	sinksOf := map[string][]string{"tenant-a": {"a-hook", "a-chat"}, "tenant-b": {"b-hook"}}
	all := []string{"a-hook", "a-chat", "b-hook"}
	const disabled = "a-chat"

	// Jobs of both tenants, interleaved, each announcing job.failed and,
	// replayed and published, job.succeeded.
	jobsOf := map[string][]string{}
	for i := range 5 {
		params := newSubmitParams(t)
		params.Tenant = []string{"tenant-a", "tenant-b"}[i%2]
		submit(t, s, params)
		job := claimOne(t, s, "w", engineLease)
		_, err := s.JobTransition(ctx, &store.JobTransitionParams{Lease: leaseOf(job), To: store.JobStatusFailed, Error: &store.JobError{Code: "BAD", Message: "bad"}})
		require.NoError(t, err)
		_, err = s.JobReplay(ctx, &store.JobReplayParams{Tenant: job.Tenant, ID: job.ID})
		require.NoError(t, err)
		_, err = Publish(ctx, s, &store.JobPublishParams{Lease: leaseOf(claimOne(t, s, "w", engineLease)), Output: []byte(`{"n": 1}`), Message: "published"})
		require.NoError(t, err)
		jobsOf[job.Tenant] = append(jobsOf[job.Tenant], job.ID)
	}
	for {
		n, err := s.OutboxRoute(ctx, &store.OutboxRouteParams{Route: func(e *store.OutboxEvent) []string { return sinksOf[e.Tenant] }, Limit: 1 + rng.IntN(4)})
		require.NoError(t, err)
		if n == 0 {
			break
		}
	}
	require.NoError(t, s.SinkDisable(ctx, &store.SinkDisableParams{Sink: disabled, Tenant: "tenant-a", Reason: "410 Gone"}))

	type key struct{ job, sink string }
	claimedOrder := map[key][]string{} // event types in the order claimed
	delivered := map[string]int{}      // event id + sink
	// drain claims with both relays until a round claims nothing, and
	// returns the sinks it saw claimed.
	drain := func() map[string]bool {
		seen := map[string]bool{}
		for round := 0; ; round++ {
			require.Less(t, round, 500, "the deliveries never drained")
			owner := fmt.Sprint("r", rng.IntN(2))
			batch, err := s.DeliveryClaim(ctx, &store.DeliveryClaimParams{Owner: owner, Sinks: all, Limit: 1 + rng.IntN(4), LeaseDuration: time.Minute})
			require.NoError(t, err)
			if len(batch) == 0 {
				return seen
			}
			inBatch := map[key]bool{}
			results := make([]store.DeliveryResult, len(batch))
			for i, d := range batch {
				k := key{d.JobID, d.Sink}
				require.False(t, inBatch[k], "two events of job %s to %s in one claim: the second must wait", d.JobID, d.Sink)
				inBatch[k] = true
				require.Contains(t, sinksOf[d.Tenant], d.Sink, "an event went to another tenant's sink")
				seen[d.Sink] = true
				claimedOrder[k] = append(claimedOrder[k], d.EventType)
				now := time.Now()
				results[i] = store.DeliveryResult{
					DeliveryID: d.ID, EventID: d.EventID, Sink: d.Sink, Tenant: d.Tenant, Attempt: d.Attempt,
					Outcome: store.DeliveryOutcomeDelivered, Status: store.DeliveryStatusDelivered, DueAt: now,
					ExternalRef: "ref-" + d.Sink + "-" + d.EventID, StartedAt: now, FinishedAt: now,
				}
				if rng.IntN(3) == 0 { // no answer: retried with the same event id
					results[i].Outcome, results[i].Status, results[i].ExternalRef = store.DeliveryOutcomeUnknown, store.DeliveryStatusPending, ""
				} else {
					delivered[d.EventID+" "+d.Sink]++
				}
			}
			res, err := s.DeliverySettle(ctx, &store.DeliverySettleParams{Owner: owner, Results: results})
			require.NoError(t, err)
			require.Empty(t, res.LeaseLost)
		}
	}

	seen := drain()
	require.False(t, seen[disabled], "a disabled sink's deliveries are not claimed")
	res, err := s.DeliveryRetry(ctx, &store.DeliveryRetryParams{Tenant: "tenant-a", Sink: disabled})
	require.NoError(t, err)
	require.True(t, res.SinkEnabled)
	require.True(t, drain()[disabled], "enabled again, the sink's deliveries go out")

	// Every (event, sink of its tenant) delivered once, in order per job.
	for tenant, jobs := range jobsOf {
		for _, job := range jobs {
			events, err := s.OutboxList(ctx, &store.OutboxListParams{JobID: job})
			require.NoError(t, err)
			require.Len(t, events, 2)
			for _, sink := range sinksOf[tenant] {
				for _, e := range events {
					require.Equal(t, 1, delivered[e.EventID+" "+sink], "event %s to %s", e.EventID, sink)
				}
				order := claimedOrder[key{job, sink}]
				require.Contains(t, order, "job.failed")
				require.Contains(t, order, "job.succeeded")
				require.Less(t, lastIndex(order, "job.failed"), slices.Index(order, "job.succeeded"), "job %s to %s: claims %v", job, sink, order)
			}
		}
		list, err := s.DeliveryList(ctx, &store.DeliveryListParams{Tenant: tenant, Limit: 1000})
		require.NoError(t, err)
		require.Len(t, list.Deliveries, 2*len(jobs)*len(sinksOf[tenant]), "one delivery per event and sink")
		for _, d := range list.Deliveries {
			require.Equal(t, store.DeliveryStatusDelivered, d.Status, "delivery %d to %s", d.ID, d.Sink)
			require.Equal(t, "ref-"+d.Sink+"-"+d.EventID, d.ExternalRef)
			journal, err := s.DeliveryAttemptList(ctx, &store.DeliveryAttemptListParams{DeliveryID: d.ID})
			require.NoError(t, err)
			landed := 0
			for _, a := range journal {
				if a.Outcome == store.DeliveryOutcomeDelivered {
					landed++
				}
			}
			require.Equal(t, 1, landed, "delivery %d: one landed attempt in the journal", d.ID)
		}
	}
}

func lastIndex(s []string, v string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == v {
			return i
		}
	}
	return -1
}
