package server_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server/limits"
)

// A SubmitJobs call that can never succeed is INVALID_ARGUMENT with a
// BadRequest on items and no RetryInfo, for a tenant under a submit rate as
// for one without: more than 1,000 items (before the rate limit sees it,
// so it spends no token), none, or more than the tenant's burst. Calls
// within the burst go on being admitted afterwards.
func TestSubmitJobsBatchThatCanNeverSucceedIsInvalidArgument(t *testing.T) {
	t.Parallel()
	rate, burst := 0.001, 5 // a token every 1000s: only the burst is there
	lim, err := limits.New(limits.Config{Section: &limits.Section{Tenants: map[string]limits.Override{
		"acme": {SubmitRate: &rate, SubmitBurst: &burst},
	}}})
	require.NoError(t, err)
	b := setup(t, setupOpts{limits: lim, quiet: true})
	items := func(n int) *oncejobv1.SubmitJobsRequest {
		r := &oncejobv1.SubmitJobsRequest{}
		for i := range n {
			r.Items = append(r.Items, &oncejobv1.SubmitJobsItem{IdempotencyKey: fmt.Sprintf("batch-%d-%d", n, i), Request: submitReq(fmt.Sprintf("doc %d", i))})
		}
		return r
	}
	for _, tc := range []struct {
		key, why string
		n        int
	}{
		{keyAcme, "over 1,000", 1001},
		{keyGlobex, "over 1,000, no limits", 1001},
		{keyAcme, "none", 0},
		{keyAcme, "over the burst", burst + 1},
		{keyAcme, "far over the burst", 1000},
	} {
		_, err := b.client.SubmitJobs(as(tc.key, ""), items(tc.n))
		st := status.Convert(err)
		require.Equal(t, codes.InvalidArgument, st.Code(), "%s: %v", tc.why, err)
		var bad *errdetails.BadRequest
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.BadRequest:
				bad = d
			case *errdetails.RetryInfo:
				t.Fatalf("%s: a retry hint on a call that can never succeed", tc.why)
			}
		}
		require.NotNil(t, bad, tc.why)
		require.Equal(t, "items", bad.GetFieldViolations()[0].GetField(), tc.why)
		if tc.n > burst && tc.n <= 1000 {
			require.Contains(t, st.Message(), "burst of 5", tc.why)
		}
	}
	// Nothing above spent a token: the whole burst is still there.
	resp, err := b.client.SubmitJobs(as(keyAcme, ""), items(burst))
	require.NoError(t, err)
	for _, r := range resp.GetResults() {
		require.Nil(t, r.GetError())
	}
}

// Health Check and Watch answer SERVING whatever unrelated metadata comes
// with them: an idempotency-key (valid, malformed, repeated), a bearer key
// nobody knows.
func TestHealthIgnoresUnrelatedMetadata(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{quiet: true})
	health := healthpb.NewHealthClient(b.conn)
	for _, md := range []metadata.MD{
		metadata.Pairs("idempotency-key", "k-1"),
		metadata.Pairs("idempotency-key", ""),
		metadata.Pairs("idempotency-key", "a", "idempotency-key", "b"),
		metadata.Pairs("idempotency-key", "k", "authorization", "Bearer nobody"),
	} {
		ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(context.Background(), md))
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		require.NoError(t, err, "%v", md)
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
		w, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
		got, err := w.Recv()
		require.NoError(t, err, "%v", md)
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, got.GetStatus())
		cancel()
	}
}
