package limits_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server/limits"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
)

// usage is a store.UsageStore whose answer the test sets.
type usage struct {
	mu    sync.Mutex
	by    map[string]store.TenantUsage
	err   error
	reads int
}

func (u *usage) TenantUsage(_ context.Context, p *store.TenantUsageParams) (*store.TenantUsage, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.reads++
	if u.err != nil {
		return nil, u.err
	}
	v := u.by[p.Tenant]
	return &v, nil
}

func doc(n int) *oncejobv1.SubmitJobRequest {
	return &oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: strings.Repeat("x", n)}}}
}

// call runs the unary interceptor for tenant name on req.
func call(l *limits.Limits, name string, req any) error {
	ctx := tenant.NewContext(context.Background(), name)
	_, err := l.UnaryServerInterceptor()(ctx, req, &grpc.UnaryServerInfo{}, func(context.Context, any) (any, error) { return nil, nil })
	return err
}

func requireExhausted(t *testing.T, err error, reason string) time.Duration {
	t.Helper()
	st := status.Convert(err)
	require.Equal(t, codes.ResourceExhausted, st.Code(), "%v", err)
	var info *errdetails.ErrorInfo
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			info = d
		case *errdetails.RetryInfo:
			retry = d
		}
	}
	require.NotNil(t, info)
	require.Equal(t, reason, info.GetReason())
	require.NotNil(t, retry)
	return retry.GetRetryDelay().AsDuration()
}

// requireOverBurst: a call of n submissions over a burst can never be
// admitted, so it is INVALID_ARGUMENT naming the items and the burst, with
// no RetryInfo, whatever the bucket holds.
func requireOverBurst(t *testing.T, err error, n, burst int) {
	t.Helper()
	st := status.Convert(err)
	require.Equal(t, codes.InvalidArgument, st.Code(), "%v", err)
	require.Contains(t, st.Message(), fmt.Sprintf("burst of %d", burst))
	var info *errdetails.ErrorInfo
	var bad *errdetails.BadRequest
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			info = d
		case *errdetails.BadRequest:
			bad = d
		case *errdetails.RetryInfo:
			t.Fatalf("a call that can never succeed carries a retry hint: %v", d)
		}
	}
	require.NotNil(t, info)
	require.Equal(t, limits.ReasonBatchOverBurst, info.GetReason())
	require.Equal(t, fmt.Sprint(n), info.GetMetadata()["items"])
	require.NotNil(t, bad)
	require.Equal(t, "items", bad.GetFieldViolations()[0].GetField())
}

func TestSection(t *testing.T) {
	t.Parallel()
	var s limits.Section
	require.NoError(t, yaml.Unmarshal([]byte(`
default:
  submit_rate: 5
  jobs_in_flight: 100
tenants:
  acme:
    submit_rate: 50
    submit_burst: 80
  globex:
    jobs_in_flight: 0
`), &s))
	l, err := limits.New(limits.Config{Default: limits.Tenant{SubmitRate: 1, WatchStreams: 7}, Section: &s, Usage: &usage{}})
	require.NoError(t, err)
	require.Equal(t, limits.Tenant{SubmitRate: 5, JobsInFlight: 100, WatchStreams: 7}, l.For("initech"), "the section's default replaces the flags it sets")
	require.Equal(t, limits.Tenant{SubmitRate: 50, SubmitBurst: 80, JobsInFlight: 100, WatchStreams: 7}, l.For("acme"))
	require.Equal(t, limits.Tenant{SubmitRate: 5, WatchStreams: 7}, l.For("globex"), "0 in an override is no limit")

	for body, want := range map[string]string{
		"default: {submit_rate: -1}":            "submit_rate must be",
		"tenants: {acme: {jobs_in_flight: -2}}": "acme: jobs_in_flight",
		"tenants: {'bad name': {}}":             "not a tenant name",
	} {
		var s limits.Section
		require.NoError(t, yaml.Unmarshal([]byte(body), &s))
		_, err := limits.New(limits.Config{Section: &s, Usage: &usage{}})
		require.ErrorContains(t, err, want, body)
	}
	_, err = limits.New(limits.Config{Default: limits.Tenant{JobsInFlight: 1}})
	require.ErrorContains(t, err, "need a store")
}

func TestSubmitRate(t *testing.T) {
	t.Parallel()
	l, err := limits.New(limits.Config{Default: limits.Tenant{SubmitRate: 0.001, SubmitBurst: 3}})
	require.NoError(t, err)

	for _, n := range []int{4, 5, 1000} {
		many := &oncejobv1.SubmitJobsRequest{Items: make([]*oncejobv1.SubmitJobsItem, n)}
		requireOverBurst(t, call(l, "acme", many), n, 3)
	}
	require.NoError(t, call(l, "acme", &oncejobv1.SubmitJobsRequest{Items: make([]*oncejobv1.SubmitJobsItem, 2)}), "a call of 2 items takes 2 tokens")
	require.NoError(t, call(l, "acme", doc(1)))
	delay := requireExhausted(t, call(l, "acme", doc(1)), limits.ReasonSubmitRate)
	require.Greater(t, delay, 900*time.Second, "a token every 1000s")
	require.NoError(t, call(l, "globex", doc(1)), "each tenant has its own bucket")
	require.NoError(t, call(l, "acme", &oncejobv1.GetJobRequest{}), "reads are not limited")
}

func TestJobsInFlightAndDocumentBytes(t *testing.T) {
	t.Parallel()
	u := &usage{by: map[string]store.TenantUsage{"acme": {InFlight: 8, DocumentBytes: 900}}}
	l, err := limits.New(limits.Config{Default: limits.Tenant{JobsInFlight: 10, DocumentBytesPerDay: 1000}, Usage: u})
	require.NoError(t, err)
	now := time.Date(2026, 12, 3, 18, 30, 0, 0, time.UTC)
	limits.SetNow(l, func() time.Time { return now })

	require.NoError(t, call(l, "acme", doc(50)))
	require.NoError(t, call(l, "acme", doc(50)), "9 + 1 in flight, 950 + 50 bytes: at the limits")
	requireExhausted(t, call(l, "acme", doc(0)), limits.ReasonJobsInFlight)
	require.Equal(t, 1, u.reads, "the usage is read once a second, this process's admissions added")

	u2 := &usage{by: map[string]store.TenantUsage{"acme": {DocumentBytes: 990}}}
	l, err = limits.New(limits.Config{Default: limits.Tenant{DocumentBytesPerDay: 1000}, Usage: u2})
	require.NoError(t, err)
	limits.SetNow(l, func() time.Time { return now })
	delay := requireExhausted(t, call(l, "acme", doc(11)), limits.ReasonDocumentBytes)
	require.Equal(t, 5*time.Hour+30*time.Minute, delay, "retry at midnight UTC")
	require.NoError(t, call(l, "acme", doc(10)))

	u3 := &usage{err: errors.New("store down")}
	l, err = limits.New(limits.Config{Default: limits.Tenant{JobsInFlight: 1}, Usage: u3})
	require.NoError(t, err)
	require.NoError(t, call(l, "acme", doc(1)), "a store that cannot say lets the call through to fail on its own")
}

type stream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s stream) Context() context.Context { return s.ctx }

func TestWatchStreams(t *testing.T) {
	t.Parallel()
	l, err := limits.New(limits.Config{Default: limits.Tenant{WatchStreams: 2}})
	require.NoError(t, err)
	intercept := l.StreamServerInterceptor()
	info := &grpc.StreamServerInfo{FullMethod: oncejobv1.JobService_WatchJob_FullMethodName}
	acme := stream{ctx: tenant.NewContext(context.Background(), "acme")}

	release := make(chan struct{})
	opened := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			_ = intercept(nil, acme, info, func(any, grpc.ServerStream) error { opened <- struct{}{}; <-release; return nil })
		})
	}
	<-opened
	<-opened
	requireExhausted(t, intercept(nil, acme, info, func(any, grpc.ServerStream) error { return nil }), limits.ReasonWatchStreams)
	globex := stream{ctx: tenant.NewContext(context.Background(), "globex")}
	require.NoError(t, intercept(nil, globex, info, func(any, grpc.ServerStream) error { return nil }))
	close(release)
	wg.Wait()
	require.NoError(t, intercept(nil, acme, info, func(any, grpc.ServerStream) error { return nil }), "closed streams free their places")
}

// TestWatchStreamsPerKey: one key cannot open more than its share of its
// tenant's watch streams; the tenant's bound holds over all its keys
// (issue #31: no cap on streams by default, none per key at all).
func TestWatchStreamsPerKey(t *testing.T) {
	t.Parallel()
	l, err := limits.New(limits.Config{Default: limits.Tenant{WatchStreams: 3, WatchStreamsPerKey: 2}})
	require.NoError(t, err)
	intercept := l.StreamServerInterceptor()
	info := &grpc.StreamServerInfo{FullMethod: oncejobv1.JobService_WatchJobs_FullMethodName}
	keyOf := func(prefix string) stream {
		return stream{ctx: tenant.WithPrincipal(context.Background(), tenant.Principal{Tenant: "acme", Role: "submitter", KeyPrefix: prefix})}
	}
	a, b := keyOf("ojk_a"), keyOf("ojk_b")

	release := make(chan struct{})
	opened := make(chan struct{})
	var wg sync.WaitGroup
	open := func(s stream) {
		wg.Go(func() {
			_ = intercept(nil, s, info, func(any, grpc.ServerStream) error { opened <- struct{}{}; <-release; return nil })
		})
		<-opened
	}
	open(a)
	open(a)
	requireExhausted(t, intercept(nil, a, info, func(any, grpc.ServerStream) error { return nil }), limits.ReasonKeyWatchStreams)
	open(b)
	requireExhausted(t, intercept(nil, b, info, func(any, grpc.ServerStream) error { return nil }), limits.ReasonWatchStreams)
	close(release)
	wg.Wait()
	require.NoError(t, intercept(nil, a, info, func(any, grpc.ServerStream) error { return nil }), "closed streams free their places")
}
