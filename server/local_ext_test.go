package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
)

// localCall is one server.Local call's headers, messages and status.
type localCall struct {
	headers []metadata.MD
	events  []*oncejobv1.JobEvent
	err     error
}

// callLocal runs WatchJob through server.Local with incoming metadata md,
// stopping after want events.
func callLocal(t *testing.T, b *watchBundle, md metadata.MD, req *oncejobv1.WatchJobRequest, want int) localCall {
	t.Helper()
	ctx, cancel := context.WithTimeout(metadata.NewIncomingContext(context.Background(), md), 60*time.Second)
	defer cancel()
	var c localCall
	c.err = b.local.Stream(ctx, oncejobv1.JobService_WatchJob_FullMethodName, req,
		func(h metadata.MD) { c.headers = append(c.headers, h) },
		func(m proto.Message) error {
			c.events = append(c.events, m.(*oncejobv1.WatchJobResponse).GetEvent())
			if len(c.events) == want {
				cancel()
			}
			return nil
		})
	return c
}

// server.Local runs the same chain as the gRPC server: request id, auth,
// validation and tenancy apply, and the handler's headers and messages
// arrive as values.
func TestLocalStreamRunsTheServersChain(t *testing.T) {
	t.Parallel()
	b := setupWatch(t)
	id := submit(t, b.client, keyAcme, "local")
	acme := metadata.Pairs("authorization", "Bearer "+keyAcme, "x-request-id", "local-1")

	ok := callLocal(t, b, acme, &oncejobv1.WatchJobRequest{JobId: id}, 1)
	require.Equal(t, codes.Canceled, status.Code(ok.err), "ended by the caller")
	require.Len(t, ok.headers, 1, "headers once")
	require.Equal(t, []string{"local-1"}, ok.headers[0].Get("x-request-id"), "the request id interceptor ran")
	require.Equal(t, []string{"true"}, ok.headers[0].Get(server.EstablishedHeader))
	require.Len(t, ok.events, 1)
	require.Equal(t, int32(1), ok.events[0].GetSeq())

	for name, tc := range map[string]struct {
		md   metadata.MD
		req  *oncejobv1.WatchJobRequest
		code codes.Code
	}{
		"no key":          {metadata.MD{}, &oncejobv1.WatchJobRequest{JobId: id}, codes.Unauthenticated},
		"unknown key":     {metadata.Pairs("authorization", "Bearer nope"), &oncejobv1.WatchJobRequest{JobId: id}, codes.Unauthenticated},
		"invalid request": {acme, &oncejobv1.WatchJobRequest{JobId: "not-a-uuid"}, codes.InvalidArgument},
		"other tenant":    {metadata.Pairs("authorization", "Bearer "+keyGlobex), &oncejobv1.WatchJobRequest{JobId: id}, codes.NotFound},
		"past the end":    {acme, &oncejobv1.WatchJobRequest{JobId: id, AfterSeq: 9}, codes.OutOfRange},
	} {
		c := callLocal(t, b, tc.md, tc.req, 1)
		require.Equal(t, tc.code, status.Code(c.err), name)
		require.Empty(t, c.events, name)
		for _, h := range c.headers {
			require.Empty(t, h.Get(server.EstablishedHeader), name)
		}
	}

	err := b.local.Stream(context.Background(), "/oncejob.v1.JobService/Nope", &oncejobv1.WatchJobRequest{}, func(metadata.MD) {}, func(proto.Message) error { return nil })
	require.Equal(t, codes.Unimplemented, status.Code(err))
}
