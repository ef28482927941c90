package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/clientsdk"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/internal/faultproxy"
)

// These tests run the Go SDK against the real binary, through a fault proxy
// or across replicas. The Python SDK's twins run in python_sdk_e2e_test.go.

const (
	submitMethod = "/oncejob.v1.JobService/SubmitJob"
	watchMethod  = "/oncejob.v1.JobService/WatchJob"
)

// serveSlow starts an embedded server whose LLM calls take latency, so a
// job stays running long enough to be watched mid-way.
func serveSlow(t *testing.T, latency time.Duration) string {
	t.Helper()
	sim := startSim(t)
	sim.setFaults(t, fmt.Sprintf(`{"latency": %q}`, latency.String()))
	addr := freeAddr(t)
	p := start(t, "serve-slow", nil, "serve", "--data-dir", t.TempDir(), "--grpc-addr", addr,
		"--llm-base-url", sim.base+"/v1", "--llm-batch-api", "--poll-interval", "20ms")
	t.Cleanup(p.stop)
	waitHealthy(t, p, addr)
	return addr
}

func startProxy(t *testing.T, backend string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(backend)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

func dialSDK(t *testing.T, addr string, opts ...clientsdk.Option) *clientsdk.Client {
	t.Helper()
	c, err := clientsdk.Dial(addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func textRequest(text string) *oncejobv1.SubmitJobRequest {
	return &oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: text}}}
}

// TestSDKRetriesLostResponseWithSameKey: the proxy lets SubmitJob reach the
// server, which commits the job, and then breaks the connection instead of
// answering — twice. The SDK retries with the same key after its backoff;
// the third attempt is answered EXISTING, and there is one job.
func TestSDKRetriesLostResponseWithSameKey(t *testing.T) {
	t.Parallel()
	addr := serveEmbedded(t)
	proxy := startProxy(t, addr)
	proxy.SetFaults(faultproxy.Faults{DropMethod: submitMethod, DropResponses: 2})

	var mu sync.Mutex
	var waits []time.Duration
	c := dialSDK(t, proxy.Addr(), clientsdk.WithRetryPolicy(clientsdk.RetryPolicy{
		InitialBackoff: 100 * time.Millisecond,
		OnRetry: func(e clientsdk.RetryEvent) {
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, e.Wait)
		},
	}))
	res, err := c.Submit(context.Background(), textRequest("Invoice 77: lost twice on the way back."))
	require.NoError(t, err)
	require.True(t, res.Replayed(), "the retry must be a replay: %v", res.Outcome)
	require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING, res.Outcome)

	calls := proxy.Calls()
	require.Len(t, calls, 3)
	require.Len(t, waits, 2)
	for i, call := range calls {
		require.Equal(t, submitMethod, call.Method)
		require.Equal(t, res.Key, call.Key, "attempt %d carried another key", i+1)
		if i < 2 {
			require.Equal(t, "dropped", call.Fault)
		}
		if i > 0 {
			// Full jitter: each wait is below its cap (100ms, then 200ms),
			// and the attempt came no sooner than the wait.
			require.Less(t, waits[i-1], 100*time.Millisecond<<(i-1))
			require.GreaterOrEqual(t, call.At.Sub(calls[i-1].At), waits[i-1])
		}
	}

	direct := dialSDK(t, addr)
	var jobs []*clientsdk.Job
	for j, err := range direct.List(context.Background(), nil) {
		require.NoError(t, err)
		jobs = append(jobs, j)
	}
	require.Len(t, jobs, 1, "one intent, one job")
	require.Equal(t, res.Job.GetId(), jobs[0].GetId())
	require.Equal(t, res.Key, jobs[0].GetIdempotencyKey())
}

// TestSDKWatchSurvivesCutStreams: the proxy cuts the watch stream twice
// while the job runs (its LLM call is slow), after the submitted and the
// claimed event (a job's events are its status transitions, three in all);
// the SDK's Watch resumes each time and the caller sees every event once, in order — the same
// events a watch of the finished job reads from the log.
func TestSDKWatchSurvivesCutStreams(t *testing.T) {
	t.Parallel()
	addr := serveSlow(t, 1500*time.Millisecond)
	proxy := startProxy(t, addr)
	proxy.SetFaults(faultproxy.Faults{CutMethod: watchMethod, CutStreams: 2, CutAfter: 1})

	c := dialSDK(t, proxy.Addr(), clientsdk.WithRetryPolicy(clientsdk.RetryPolicy{InitialBackoff: 20 * time.Millisecond}))
	res, err := c.Submit(context.Background(), textRequest("A document watched through a bad network."))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var seen []*clientsdk.Event
	for e, err := range c.Watch(ctx, res.Job.GetId()) {
		require.NoError(t, err)
		seen = append(seen, e)
	}

	var cuts []faultproxy.Call
	for _, call := range proxy.Calls() {
		if call.Method == watchMethod && call.Fault == "cut" {
			cuts = append(cuts, call)
		}
	}
	require.Len(t, cuts, 2)
	watches := 0
	for _, call := range proxy.Calls() {
		if call.Method == watchMethod {
			watches++
		}
	}
	require.Equal(t, 3, watches, "two cuts, two resumes")
	requireCompleteLog(t, dialSDK(t, addr), res.Job.GetId(), seen)
	terminal := seen[len(seen)-1].GetTime().AsTime()
	require.True(t, cuts[1].At.Before(terminal), "the cuts happened while the job ran (last cut %v, end %v)", cuts[1].At, terminal)
}

// requireCompleteLog checks that seen is the job's whole log: seq 1..n with
// no gap and no repeat, ending in SUCCEEDED, equal to what a fresh watch of
// the finished job reads.
func requireCompleteLog(t *testing.T, c *clientsdk.Client, jobID string, seen []*clientsdk.Event) {
	t.Helper()
	var want []*clientsdk.Event
	for e, err := range c.Watch(context.Background(), jobID) {
		require.NoError(t, err)
		want = append(want, e)
	}
	require.GreaterOrEqual(t, len(want), 3) // submitted, claimed, ..., published
	require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_SUCCEEDED, want[len(want)-1].GetStatus())
	require.Len(t, seen, len(want), "events seen: %v", seqs(seen))
	for i := range want {
		require.EqualValues(t, i+1, seen[i].GetSeq(), "events seen: %v", seqs(seen))
		require.Equal(t, want[i].String(), seen[i].String())
	}
}

func seqs(events []*clientsdk.Event) []int32 {
	out := make([]int32, len(events))
	for i, e := range events {
		out[i] = e.GetSeq()
	}
	return out
}

// TestSDKWatchResumesOnAnotherReplica: two `serve` processes on one
// Postgres schema; the SDK dials both. Mid-watch the replica it watches on
// shuts down (SERVER_SHUTTING_DOWN); Watch resumes on the other and the
// caller sees every event once, in order.
func TestSDKWatchResumesOnAnotherReplica(t *testing.T) {
	t.Parallel()
	cl := newWatchCluster(t)
	id := cl.submit(t, 1)[0]
	steps := cl.steps(t, 1) // the claim is event 2
	var mu sync.Mutex
	var reconnects []error
	c := dialSDK(t, cl.replicas[0].addr+","+cl.replicas[1].addr, clientsdk.WithRetryPolicy(clientsdk.RetryPolicy{
		InitialBackoff: 20 * time.Millisecond,
		OnRetry: func(e clientsdk.RetryEvent) {
			mu.Lock()
			defer mu.Unlock()
			reconnects = append(reconnects, e.Err)
		},
	}))

	events := make(chan *clientsdk.Event)
	done := make(chan error, 1)
	go func() {
		defer close(events)
		for e, err := range c.Watch(context.Background(), id) {
			if err != nil {
				done <- err
				return
			}
			events <- e
		}
		done <- nil
	}()
	var seen []*clientsdk.Event
	next := func() {
		select {
		case e := <-events:
			require.NotNil(t, e, "watch ended early")
			seen = append(seen, e)
		case <-time.After(30 * time.Second):
			t.Fatalf("no event after %v", seqs(seen))
		}
	}
	next()
	next()
	steps[0]()
	next()
	cl.replicas[0].stop() // the replica the watch is on (the first address)
	for _, step := range steps[1:] {
		step()
		next()
	}
	require.NoError(t, <-done)
	requireCompleteLog(t, dialSDK(t, cl.replicas[1].addr), id, seen)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, reconnects, "the watch was on the stopped replica and resumed")
	require.Contains(t, reconnects[0].Error(), "server shutting down; resume with after_seq=3")
}

// TestSDKWatchJobsSurvivesCutStreams: the tenant-wide watch, cut twice by
// the proxy, resumes from its last cursor: the changes it yields are the
// log's, each once, in order.
func TestSDKWatchJobsSurvivesCutStreams(t *testing.T) {
	t.Parallel()
	addr := serveEmbedded(t)
	direct := dialSDK(t, addr)
	var ids []string
	for i := range 4 {
		res, err := direct.Submit(context.Background(), textRequest(fmt.Sprintf("tenant-wide watch %d", i)))
		require.NoError(t, err)
		_, err = direct.Wait(context.Background(), res.Job.GetId())
		require.NoError(t, err)
		ids = append(ids, res.Job.GetId())
	}
	// The four jobs are done: the log holds 12 changes (submitted, claimed,
	// published each).
	collect := func(c *clientsdk.Client) []string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var got []string
		for ch, err := range c.WatchJobs(ctx, &oncejobv1.WatchJobsRequest{}) {
			require.NoError(t, err)
			got = append(got, fmt.Sprintf("%s %s %d %s", ch.GetCursor(), ch.GetEvent().GetJobId(), ch.GetEvent().GetSeq(), ch.GetEvent().GetStatus()))
			if len(got) == 12 {
				break
			}
		}
		return got
	}
	want := collect(direct)

	proxy := startProxy(t, addr)
	proxy.SetFaults(faultproxy.Faults{CutMethod: "/oncejob.v1.JobService/WatchJobs", CutStreams: 2, CutAfter: 3})
	got := collect(dialSDK(t, proxy.Addr(), clientsdk.WithRetryPolicy(clientsdk.RetryPolicy{InitialBackoff: 10 * time.Millisecond})))
	require.Equal(t, want, got)
	cuts := 0
	for _, call := range proxy.Calls() {
		if call.Fault == "cut" {
			cuts++
		}
	}
	require.Equal(t, 2, cuts)
	for _, id := range ids {
		require.Contains(t, strings.Join(got, "\n"), id+" 3 JOB_STATUS_SUCCEEDED")
	}
}
