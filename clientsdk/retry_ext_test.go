package clientsdk_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/oncejob/oncejob/clientsdk"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// fakeServer is a JobService whose answers a test scripts. It records the
// time and idempotency key of every SubmitJob attempt.
type fakeServer struct {
	oncejobv1.UnimplementedJobServiceServer
	submit func(n int) (*oncejobv1.SubmitJobResponse, error)
	watch  func(req *oncejobv1.WatchJobRequest, stream grpc.ServerStreamingServer[oncejobv1.WatchJobResponse]) error
	jobs   func(req *oncejobv1.WatchJobsRequest, stream grpc.ServerStreamingServer[oncejobv1.WatchJobsResponse]) error
	cancel func(n int) (*oncejobv1.CancelJobResponse, error)

	mu       sync.Mutex
	attempts []attempt
}

type attempt struct {
	at  time.Time
	key string
}

func (f *fakeServer) SubmitJob(ctx context.Context, _ *oncejobv1.SubmitJobRequest) (*oncejobv1.SubmitJobResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	f.attempts = append(f.attempts, attempt{at: time.Now(), key: first(md.Get("idempotency-key"))})
	n := len(f.attempts)
	f.mu.Unlock()
	return f.submit(n)
}

func (f *fakeServer) WatchJob(req *oncejobv1.WatchJobRequest, stream grpc.ServerStreamingServer[oncejobv1.WatchJobResponse]) error {
	return f.watch(req, stream)
}

func (f *fakeServer) WatchJobs(req *oncejobv1.WatchJobsRequest, stream grpc.ServerStreamingServer[oncejobv1.WatchJobsResponse]) error {
	return f.jobs(req, stream)
}

func (f *fakeServer) CancelJob(ctx context.Context, _ *oncejobv1.CancelJobRequest) (*oncejobv1.CancelJobResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	f.attempts = append(f.attempts, attempt{at: time.Now(), key: first(md.Get("idempotency-key"))})
	n := len(f.attempts)
	f.mu.Unlock()
	return f.cancel(n)
}

func (f *fakeServer) recorded() []attempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]attempt(nil), f.attempts...)
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// startFake serves f on loopback and returns a Client of it.
func startFake(t *testing.T, f *fakeServer, opts ...clientsdk.Option) *clientsdk.Client {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	oncejobv1.RegisterJobServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	c, err := clientsdk.Dial(lis.Addr().String(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func submitReq() *oncejobv1.SubmitJobRequest {
	return &oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "hello"}}}
}

func created() *oncejobv1.SubmitJobResponse {
	return &oncejobv1.SubmitJobResponse{Job: &oncejobv1.Job{Id: "job-1"}, Outcome: oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED}
}

func exhausted(delay time.Duration) error {
	st, _ := status.New(codes.ResourceExhausted, "slow down").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)})
	return st.Err()
}

// TestRetryInfoIsWaitedOut: RESOURCE_EXHAUSTED with RetryInfo is retried
// after exactly the delay it names, with the same key, until it succeeds.
func TestRetryInfoIsWaitedOut(t *testing.T) {
	t.Parallel()
	const delay = 300 * time.Millisecond
	f := &fakeServer{submit: func(n int) (*oncejobv1.SubmitJobResponse, error) {
		if n <= 2 {
			return nil, exhausted(delay)
		}
		return created(), nil
	}}
	var waits []time.Duration
	c := startFake(t, f, clientsdk.WithRetryPolicy(clientsdk.RetryPolicy{OnRetry: func(e clientsdk.RetryEvent) {
		require.Equal(t, codes.ResourceExhausted, status.Code(e.Err))
		waits = append(waits, e.Wait)
	}}))
	res, err := c.Submit(context.Background(), submitReq())
	require.NoError(t, err)
	require.Equal(t, "job-1", res.Job.GetId())
	require.Equal(t, []time.Duration{delay, delay}, waits, "the server's delay, not the backoff's")
	got := f.recorded()
	require.Len(t, got, 3)
	for i := 1; i < len(got); i++ {
		require.Equal(t, res.Key, got[i].key, "one key for every attempt")
		require.GreaterOrEqual(t, got[i].at.Sub(got[i-1].at), delay, "attempt %d came before the RetryInfo delay", i+1)
	}
}

// TestDeadlineShorterThanBudgetEndsAtDeadline: a RetryInfo delay longer
// than what is left of the deadline is cut at the deadline: the call ends
// there with a BudgetError, never after.
func TestDeadlineShorterThanBudgetEndsAtDeadline(t *testing.T) {
	t.Parallel()
	f := &fakeServer{submit: func(int) (*oncejobv1.SubmitJobResponse, error) { return nil, exhausted(time.Hour) }}
	c := startFake(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := c.Submit(ctx, submitReq()); done <- err }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute): // the hour-long wait was not cut
		t.Fatal("Submit waited past its deadline")
	}
	deadline, _ := ctx.Deadline()
	require.False(t, time.Now().Before(deadline), "the call ended before its deadline")
	require.ErrorIs(t, err, clientsdk.ErrBudgetSpent)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, codes.DeadlineExceeded, status.Code(err))
	var be *clientsdk.BudgetError
	require.True(t, errors.As(err, &be))
	require.True(t, be.Deadline)
	require.Equal(t, 1, be.Attempts)
	require.Equal(t, codes.ResourceExhausted, status.Code(be.Last))
	require.Len(t, f.recorded(), 1)
}

// TestBackoffIsExponentialWithFullJitter: with the jitter pinned at its
// top, each wait is its cap, doubling from InitialBackoff up to MaxBackoff,
// and the server sees attempts no sooner; the attempts run out with a
// BudgetError carrying the last status.
func TestBackoffIsExponentialWithFullJitter(t *testing.T) {
	t.Parallel()
	f := &fakeServer{submit: func(int) (*oncejobv1.SubmitJobResponse, error) {
		return nil, status.Error(codes.Unavailable, "down")
	}}
	var waits []time.Duration
	c := startFake(t, f, clientsdk.WithRetryPolicy(clientsdk.RetryPolicy{
		MaxAttempts: 5, InitialBackoff: 40 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Jitter:  func() float64 { return 1 },
		OnRetry: func(e clientsdk.RetryEvent) { waits = append(waits, e.Wait) },
	}))
	_, err := c.Submit(context.Background(), submitReq())
	var be *clientsdk.BudgetError
	require.True(t, errors.As(err, &be), "%v", err)
	require.False(t, be.Deadline)
	require.Equal(t, 5, be.Attempts)
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.ErrorIs(t, err, clientsdk.ErrBudgetSpent)
	ms := time.Millisecond
	require.Equal(t, []time.Duration{40 * ms, 80 * ms, 160 * ms, 200 * ms}, waits)
	got := f.recorded()
	require.Len(t, got, 5)
	for i := 1; i < len(got); i++ {
		require.Equal(t, got[0].key, got[i].key)
		require.GreaterOrEqual(t, got[i].at.Sub(got[i-1].at), waits[i-1])
	}

	// Unpinned, every wait is somewhere below its cap.
	waits = nil
	c2 := startFake(t, f, clientsdk.WithRetryPolicy(clientsdk.RetryPolicy{
		MaxAttempts: 8, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
		OnRetry: func(e clientsdk.RetryEvent) { waits = append(waits, e.Wait) },
	}))
	_, err = c2.Submit(context.Background(), submitReq())
	require.ErrorIs(t, err, clientsdk.ErrBudgetSpent)
	require.Len(t, waits, 7)
	for i, w := range waits {
		ceiling := min(10*ms<<i, 40*ms)
		require.True(t, w >= 0 && w < ceiling, "wait %d = %v, cap %v", i+1, w, ceiling)
	}
}

// TestErrorsDecode: statuses with google.rpc details become the SDK's
// types, and are not retried.
func TestErrorsDecode(t *testing.T) {
	t.Parallel()
	reused, _ := status.New(codes.InvalidArgument, "reused").WithDetails(&errdetails.ErrorInfo{Reason: "IDEMPOTENCY_KEY_REUSED", Domain: "oncejob.dev"})
	bad, _ := status.New(codes.InvalidArgument, "bad").WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "pipeline", Description: "unknown"}}})
	conflict, _ := status.New(codes.FailedPrecondition, "no").WithDetails(&errdetails.ErrorInfo{Reason: "JOB_STATUS_CONFLICT", Domain: "oncejob.dev", Metadata: map[string]string{"job_id": "j", "status": "JOB_STATUS_SUCCEEDED"}})
	for name, tc := range map[string]struct {
		err   error
		check func(t *testing.T, err error)
	}{
		"key reused": {reused.Err(), func(t *testing.T, err error) {
			var e *clientsdk.KeyReusedError
			require.True(t, errors.As(err, &e))
			require.Equal(t, "my-key", e.Key)
		}},
		"invalid": {bad.Err(), func(t *testing.T, err error) {
			var e *clientsdk.InvalidRequestError
			require.True(t, errors.As(err, &e))
			require.Equal(t, []clientsdk.FieldViolation{{Field: "pipeline", Description: "unknown"}}, e.Violations)
		}},
		"precondition": {conflict.Err(), func(t *testing.T, err error) {
			var e *clientsdk.PreconditionError
			require.True(t, errors.As(err, &e))
			require.Equal(t, "j", e.JobID)
			require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_SUCCEEDED, e.JobStatus)
		}},
		"not found": {status.Error(codes.NotFound, "job x not found"), func(t *testing.T, err error) {
			require.ErrorIs(t, err, clientsdk.ErrNotFound)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := &fakeServer{submit: func(int) (*oncejobv1.SubmitJobResponse, error) { return nil, tc.err }}
			c := startFake(t, f)
			_, err := c.Submit(context.Background(), submitReq(), clientsdk.WithIdempotencyKey("my-key"))
			require.Error(t, err)
			require.Equal(t, status.Code(tc.err), status.Code(err), "the status survives decoding")
			tc.check(t, err)
			require.Len(t, f.recorded(), 1, "not retried")
		})
	}
}

// TestWatchResumesAfterEachCut: a stream that breaks after every two
// events — with SERVER_SHUTTING_DOWN or a plain UNAVAILABLE — is resumed
// from the last seq yielded; the caller sees 1..7 once each.
func TestWatchResumesAfterEachCut(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var afters []int32
	f := &fakeServer{watch: func(req *oncejobv1.WatchJobRequest, stream grpc.ServerStreamingServer[oncejobv1.WatchJobResponse]) error {
		mu.Lock()
		afters = append(afters, req.GetAfterSeq())
		mu.Unlock()
		for seq := req.GetAfterSeq() + 1; seq <= 7; seq++ {
			st := oncejobv1.JobStatus_JOB_STATUS_RUNNING
			if seq == 7 {
				st = oncejobv1.JobStatus_JOB_STATUS_SUCCEEDED
			}
			if err := stream.Send(&oncejobv1.WatchJobResponse{Event: &oncejobv1.JobEvent{Seq: seq, Status: st}}); err != nil {
				return err
			}
			if seq%2 == 0 {
				if seq == 4 {
					s, _ := status.New(codes.Unavailable, "server shutting down").WithDetails(&errdetails.ErrorInfo{Reason: "SERVER_SHUTTING_DOWN"})
					return s.Err()
				}
				return status.Error(codes.Unavailable, "cut")
			}
		}
		return nil
	}}
	c := startFake(t, f, clientsdk.WithRetryPolicy(clientsdk.RetryPolicy{InitialBackoff: time.Millisecond}))
	var seqs []int32
	for e, err := range c.Watch(context.Background(), "job-1") {
		require.NoError(t, err)
		seqs = append(seqs, e.GetSeq())
	}
	require.Equal(t, []int32{1, 2, 3, 4, 5, 6, 7}, seqs)
	require.Equal(t, []int32{0, 2, 4, 6}, afters)

	// A caller that stops early ends the stream; one that starts later
	// gets only the rest.
	seqs = nil
	for e, err := range c.Watch(context.Background(), "job-1", clientsdk.AfterSeq(5)) {
		require.NoError(t, err)
		seqs = append(seqs, e.GetSeq())
		break
	}
	require.Equal(t, []int32{6}, seqs)
}

// TestWatchJobsResumesFromTheLastCursor: a tenant-wide watch cut after
// every change resumes from the cursor of the last change it yielded.
func TestWatchJobsResumesFromTheLastCursor(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var afters []string
	f := &fakeServer{jobs: func(req *oncejobv1.WatchJobsRequest, stream grpc.ServerStreamingServer[oncejobv1.WatchJobsResponse]) error {
		mu.Lock()
		afters = append(afters, req.GetAfterCursor())
		mu.Unlock()
		assert.Equal(t, "summarize", req.GetPipeline(), "filters survive a resume")
		next := 1
		if c := req.GetAfterCursor(); c != "" {
			next = int(c[1]-'0') + 1
		}
		if next > 4 {
			<-stream.Context().Done() // nothing new: a quiet, open stream
			return nil
		}
		_ = stream.Send(&oncejobv1.WatchJobsResponse{Cursor: fmt.Sprintf("c%d", next), Event: &oncejobv1.JobEvent{Seq: int32(next)}})
		return status.Error(codes.Unavailable, "cut")
	}}
	c := startFake(t, f, clientsdk.WithRetryPolicy(clientsdk.RetryPolicy{InitialBackoff: time.Millisecond}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cursors []string
	for ch, err := range c.WatchJobs(ctx, &oncejobv1.WatchJobsRequest{Pipeline: "summarize"}) {
		require.NoError(t, err)
		cursors = append(cursors, ch.GetCursor())
		if len(cursors) == 4 {
			break
		}
	}
	require.Equal(t, []string{"c1", "c2", "c3", "c4"}, cursors)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"", "c1", "c2", "c3"}, afters)
}

// TestOperatorCallsMakeOneKeyPerCall: an operator call without a key gets
// one, the same on each of its attempts and another for the next call.
func TestOperatorCallsMakeOneKeyPerCall(t *testing.T) {
	t.Parallel()
	f := &fakeServer{cancel: func(n int) (*oncejobv1.CancelJobResponse, error) {
		if n%2 == 1 {
			return nil, status.Error(codes.Unavailable, "lost")
		}
		return &oncejobv1.CancelJobResponse{Job: &oncejobv1.Job{Id: "j"}}, nil
	}}
	c := startFake(t, f, clientsdk.WithRetryPolicy(clientsdk.RetryPolicy{InitialBackoff: time.Millisecond}))
	for range 2 {
		_, err := c.Cancel(context.Background(), &oncejobv1.CancelJobRequest{JobId: "j"})
		require.NoError(t, err)
	}
	got := f.recorded()
	require.Len(t, got, 4)
	require.NotEmpty(t, got[0].key)
	require.Equal(t, got[0].key, got[1].key, "one key for the attempts of a call")
	require.Equal(t, got[2].key, got[3].key)
	require.NotEqual(t, got[0].key, got[2].key, "another call, another key")
}
