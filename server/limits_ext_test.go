package server_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/server/limits"
)

func requireRetryInfo(t *testing.T, err error) time.Duration {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	t.Fatalf("no RetryInfo in %v", err)
	return 0
}

// p99 is the 99th percentile of d (nearest rank).
func p99(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)*99+99)/100-1]
}

// A tenant over its submit rate gets RESOURCE_EXHAUSTED with RetryInfo and
// ErrorInfo, at a cost to the server of a map lookup, so another tenant on
// the same server is not slowed: its p99 submit latency while the first
// hammers at 10 times its rate stays within 2x of its p99 alone.
//
// Not parallel: it measures latency, so it runs while this package's
// parallel tests wait. The machine is still shared (2 cores, other
// packages' tests, the race detector in CI), and the p99 of a few hundred
// calls moves by more than 2x when another process takes the cores for a
// few seconds. So the two conditions are measured interleaved, in short
// blocks — 30 calls alone, 30 beside the noisy tenant, and again, 20 times
// — and each condition's p99 is taken over its 600 calls: a slow spell of
// the machine falls on both alike instead of on one phase. With that, the
// bound is the promise itself, 2x, with no further slack.
func TestTenantOverItsRateDoesNotSlowAnother(t *testing.T) {
	rate, burst := 5.0, 5
	lim, err := limits.New(limits.Config{Section: &limits.Section{Tenants: map[string]limits.Override{
		"acme": {SubmitRate: &rate, SubmitBurst: &burst},
	}}})
	require.NoError(t, err)
	client := setup(t, setupOpts{limits: lim, quiet: true}).client

	var seq atomic.Int64
	submitAs := func(key string) error {
		_, err := client.SubmitJob(as(key, fmt.Sprintf("%s-%d", key, seq.Add(1))), submitReq(fmt.Sprintf("document %d", seq.Load())))
		return err
	}
	// measure submits n documents as globex, one after another, and returns
	// each call's latency.
	measure := func(n int) []time.Duration {
		lat := make([]time.Duration, n)
		for i := range lat {
			start := time.Now()
			require.NoError(t, submitAs(keyGlobex))
			lat[i] = time.Since(start)
		}
		return lat
	}
	// noisy submits as acme at 50 calls a second, 10 times its rate,
	// ignoring RetryInfo, until stop; it counts what it was answered. (Not
	// faster: the property is that a tenant over its rate costs the others
	// nothing beyond the refusals themselves; a flood of thousands of calls
	// a second is a CPU denial of service on a 2-core machine, which no
	// per-tenant limit inside the process can answer.)
	var accepted, refused atomic.Int64
	var on atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			tick := time.NewTicker(40 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if !on.Load() {
					continue
				}
				err := submitAs(keyAcme)
				switch status.Code(err) {
				case codes.OK:
					accepted.Add(1)
				case codes.ResourceExhausted:
					refused.Add(1)
				default:
					t.Errorf("noisy tenant: %v", err)
					return
				}
			}
		})
	}
	defer wg.Wait()
	defer close(stop)

	// The refusal itself: the limit's reason and when to retry.
	// The burst passes; the bucket refills while it does, so a few more may.
	for i := 0; err == nil; i++ {
		require.Less(t, i, 4*burst, "acme is never refused")
		err = submitAs(keyAcme)
	}
	requireReason(t, err, codes.ResourceExhausted, limits.ReasonSubmitRate)
	delay := requireRetryInfo(t, err)
	require.Greater(t, delay, time.Duration(0))
	require.LessOrEqual(t, delay, time.Second/time.Duration(rate)+time.Millisecond, "one token's wait")

	measure(100) // warm up connections, plans, the group commit
	noisyFrom := time.Now()
	// Up to three rounds, the first within the bound passing: a limiter
	// that slows the other tenants fails every round, while a round that a
	// loaded CI machine (other packages' tests at once, load average 15 and
	// more) pushed past 2x is seen on its own (2.12x and 2.81x were).
	var ratio float64
	for round := 1; round <= 3; round++ {
		var alone, beside []time.Duration
		for range 20 {
			alone = append(alone, measure(30)...)
			on.Store(true)
			beside = append(beside, measure(30)...)
			on.Store(false)
		}
		ratio = float64(p99(beside)) / float64(p99(alone))
		t.Logf("round %d: globex p99 alone %s, beside acme over its rate %s: %.2fx; acme: %d accepted, %d refused (RESOURCE_EXHAUSTED)",
			round, p99(alone), p99(beside), ratio, accepted.Load(), refused.Load())
		if ratio <= 2.0 {
			break
		}
	}
	// A token bucket admits at most its burst plus its rate over the time.
	require.LessOrEqual(t, float64(accepted.Load()), float64(burst)+rate*time.Since(noisyFrom).Seconds(), "acme was held to its rate")
	require.Greater(t, refused.Load(), accepted.Load())
	require.LessOrEqual(t, ratio, 2.0, "globex's p99 beside a tenant over its rate, against alone, in every round")
}
