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
// hammers at 20 times its rate stays within 2x of its p99 alone.
//
// Not parallel: it measures latency, so it runs while this package's
// parallel tests wait. The machine is still shared (2 cores, other
// packages' tests), and one p99 of a few hundred calls moves by more than
// 2x when another process takes the cores for a moment. So the test runs
// three rounds, each "alone" then "beside the noisy tenant", back to back,
// and bounds the median of the three ratios: a disturbance that lands on
// one phase moves one ratio, not the median. The bound itself is the 2x of
// the promise; the slack is in the median, not in a bigger bound.
func TestTenantOverItsRateDoesNotSlowAnother(t *testing.T) {
	rate, burst := 50.0, 10
	lim, err := limits.New(limits.Config{Section: &limits.Section{Tenants: map[string]limits.Override{
		"acme": {SubmitRate: &rate, SubmitBurst: &burst},
	}}})
	require.NoError(t, err)
	client := setup(t, setupOpts{limits: lim}).client

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
	// noisy submits as acme at 1000 calls a second, 20 times its rate,
	// ignoring RetryInfo, until stop; it counts what it was answered.
	var accepted, refused atomic.Int64
	noisy := func(stop <-chan struct{}) *sync.WaitGroup {
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				tick := time.NewTicker(2 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
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
		return &wg
	}

	// The refusal itself: the limit's reason and when to retry.
	// The burst passes; the bucket refills while it does, so a few more may.
	for i := 0; err == nil; i++ {
		require.Less(t, i, 2*burst, "acme is never refused")
		err = submitAs(keyAcme)
	}
	requireReason(t, err, codes.ResourceExhausted, limits.ReasonSubmitRate)
	delay := requireRetryInfo(t, err)
	require.Greater(t, delay, time.Duration(0))
	require.LessOrEqual(t, delay, time.Second/time.Duration(rate)+time.Millisecond, "one token's wait")

	measure(100) // warm up connections, plans, the group commit
	const n = 300
	var ratios []float64
	for round := range 3 {
		alone := p99(measure(n))
		stop := make(chan struct{})
		wg := noisy(stop)
		beside := p99(measure(n))
		close(stop)
		wg.Wait()
		ratio := float64(beside) / float64(alone)
		ratios = append(ratios, ratio)
		t.Logf("round %d: globex p99 alone %s, beside acme over its rate %s: %.2fx", round+1, alone, beside, ratio)
	}
	slices.Sort(ratios)
	t.Logf("acme: %d accepted, %d refused (RESOURCE_EXHAUSTED); median ratio %.2fx", accepted.Load(), refused.Load(), ratios[1])
	require.Greater(t, refused.Load(), 10*accepted.Load(), "acme was held to its rate")
	require.LessOrEqual(t, ratios[1], 2.0, "globex's p99 beside a tenant over its rate, against alone")
}
