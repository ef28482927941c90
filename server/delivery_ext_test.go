package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/store"
)

// TestDeliveryRPCs: ListDeliveries and RetryDelivery are tenant-scoped, list
// dead letters first with the disabled sinks, retry a dead letter once (a
// repeat returns it pending), refuse a delivered one with
// FAILED_PRECONDITION, and validate with BadRequest.
func TestDeliveryRPCs(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	ds := b.store.(store.DeliveryStore)
	engine := b.store.(store.EngineStore)
	client := oncejobv1.NewDeliveryServiceClient(b.conn)

	// Two failed jobs of acme: two job.failed events, routed to one sink.
	for i := range 2 {
		sub, err := b.client.SubmitJob(as(keyAcme, "k"+string(rune('a'+i))), submitReq("deliver me "+string(rune('a'+i))))
		require.NoError(t, err)
		jobs, err := engine.JobClaim(ctx, &store.JobClaimParams{Owner: "w", Limit: 10, LeaseDuration: time.Minute})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		_, err = engine.JobTransition(ctx, &store.JobTransitionParams{
			Lease: store.Lease{JobID: sub.GetJob().GetId(), Owner: "w", Attempt: jobs[0].Attempt}, To: store.JobStatusFailed,
		})
		require.NoError(t, err)
	}
	_, err := ds.OutboxRoute(ctx, &store.OutboxRouteParams{Route: func(e *store.OutboxEvent) []string { return []string{"hook"} }})
	require.NoError(t, err)
	claimed, err := ds.DeliveryClaim(ctx, &store.DeliveryClaimParams{Owner: "r", Sinks: []string{"hook"}, Limit: 10, LeaseDuration: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	now := time.Now()
	results := []store.DeliveryResult{
		{DeliveryID: claimed[0].ID, EventID: claimed[0].EventID, Sink: "hook", Tenant: "acme", Attempt: 1, Outcome: store.DeliveryOutcomeDelivered, Status: store.DeliveryStatusDelivered, HTTPStatus: 200, ExternalRef: "receipt-1", StartedAt: now, FinishedAt: now},
		{DeliveryID: claimed[1].ID, EventID: claimed[1].EventID, Sink: "hook", Tenant: "acme", Attempt: 1, Outcome: store.DeliveryOutcomeDeadLettered, Status: store.DeliveryStatusDeadLettered, HTTPStatus: 400, Error: "HTTP 400: bad", StartedAt: now, FinishedAt: now},
	}
	_, err = ds.DeliverySettle(ctx, &store.DeliverySettleParams{Owner: "r", Results: results})
	require.NoError(t, err)
	require.NoError(t, ds.SinkDisable(ctx, &store.SinkDisableParams{Sink: "hook", Tenant: "acme", Reason: "410 Gone"}))
	delivered, dead := claimed[0].ID, claimed[1].ID

	list, err := client.ListDeliveries(as(keyAcme, ""), &oncejobv1.ListDeliveriesRequest{IncludeAttempts: true})
	require.NoError(t, err)
	require.Len(t, list.GetDeliveries(), 2)
	require.Equal(t, dead, list.GetDeliveries()[0].GetId(), "dead letters first")
	require.Equal(t, oncejobv1.DeliveryStatus_DELIVERY_STATUS_DEAD_LETTERED, list.GetDeliveries()[0].GetStatus())
	require.Equal(t, "HTTP 400: bad", list.GetDeliveries()[0].GetLastError())
	require.Equal(t, "receipt-1", list.GetDeliveries()[1].GetExternalRef())
	require.Len(t, list.GetDeliveries()[1].GetAttemptLog(), 1)
	require.Len(t, list.GetDisabledSinks(), 1)
	require.Equal(t, "410 Gone", list.GetDisabledSinks()[0].GetReason())

	// Pages of one.
	page, err := client.ListDeliveries(as(keyAcme, ""), &oncejobv1.ListDeliveriesRequest{PageSize: 1})
	require.NoError(t, err)
	require.NotEmpty(t, page.GetNextPageToken())
	page2, err := client.ListDeliveries(as(keyAcme, ""), &oncejobv1.ListDeliveriesRequest{PageSize: 1, PageToken: page.GetNextPageToken()})
	require.NoError(t, err)
	require.Equal(t, delivered, page2.GetDeliveries()[0].GetId())

	// Another tenant sees nothing and retries nothing.
	other, err := client.ListDeliveries(as(keyGlobex, ""), &oncejobv1.ListDeliveriesRequest{})
	require.NoError(t, err)
	require.Empty(t, other.GetDeliveries())
	require.Empty(t, other.GetDisabledSinks())
	_, err = client.RetryDelivery(as(keyGlobex, ""), &oncejobv1.RetryDeliveryRequest{Target: &oncejobv1.RetryDeliveryRequest_DeliveryId{DeliveryId: dead}})
	require.Equal(t, codes.NotFound, status.Code(err))

	// Retry the dead letter; a repeat returns it pending, queueing nothing.
	for range 2 {
		resp, err := client.RetryDelivery(as(keyAcme, ""), &oncejobv1.RetryDeliveryRequest{Target: &oncejobv1.RetryDeliveryRequest_DeliveryId{DeliveryId: dead}})
		require.NoError(t, err)
		require.Len(t, resp.GetDeliveries(), 1)
		require.Equal(t, oncejobv1.DeliveryStatus_DELIVERY_STATUS_PENDING, resp.GetDeliveries()[0].GetStatus())
		require.Zero(t, resp.GetDeliveries()[0].GetAttempts())
	}

	// A delivered one: FAILED_PRECONDITION naming its status.
	_, err = client.RetryDelivery(as(keyAcme, ""), &oncejobv1.RetryDeliveryRequest{Target: &oncejobv1.RetryDeliveryRequest_DeliveryId{DeliveryId: delivered}})
	requireReason(t, err, codes.FailedPrecondition, "DELIVERY_STATUS_CONFLICT")

	// The sink: enabled again.
	resp, err := client.RetryDelivery(as(keyAcme, ""), &oncejobv1.RetryDeliveryRequest{Target: &oncejobv1.RetryDeliveryRequest_Sink{Sink: "hook"}})
	require.NoError(t, err)
	require.True(t, resp.GetSinkEnabled())

	// Bad requests: BadRequest naming the field.
	for _, req := range []*oncejobv1.RetryDeliveryRequest{
		{},
		{Target: &oncejobv1.RetryDeliveryRequest_DeliveryId{DeliveryId: -1}},
		{Target: &oncejobv1.RetryDeliveryRequest_Sink{Sink: "no spaces allowed"}},
	} {
		_, err := client.RetryDelivery(as(keyAcme, ""), req)
		requireBadRequest(t, err)
	}
	for _, req := range []*oncejobv1.ListDeliveriesRequest{{JobId: "not-a-uuid"}, {PageToken: "garbage"}, {PageSize: 501}, {Status: 42}} {
		_, err := client.ListDeliveries(as(keyAcme, ""), req)
		requireBadRequest(t, err)
	}
}

func requireBadRequest(t *testing.T, err error) {
	t.Helper()
	st := status.Convert(err)
	require.Equal(t, codes.InvalidArgument, st.Code(), st.Message())
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			require.NotEmpty(t, br.GetFieldViolations())
			return
		}
	}
	t.Fatalf("no BadRequest in %v", st.Details())
}
