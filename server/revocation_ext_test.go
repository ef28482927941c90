package server_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/watch"
)

// Every server stream — WatchJob, WatchJobs, WatchRun — opened with a key
// that is then revoked on the other replica ends with UNAUTHENTICATED
// (ErrorInfo API_KEY_REVOKED) within twice the key cache TTL (1s); the
// streams of another key of the same tenant stay open.
func TestRevokedKeyEndsEveryStream(t *testing.T) {
	t.Parallel()
	url := storepgtest.NewMigratedSchemaURL(t)
	ctx := context.Background()
	r1, r2 := startReplica(t, url), startReplica(t, url)
	revoked, prefix := createKey(t, r1.store, "acme", store.RoleSubmitter)
	other, _ := createKey(t, r1.store, "acme", store.RoleSubmitter)

	sub, err := r1.jobs.SubmitJob(as(other, "revoke-streams-1"), submitReq("an invoice")) // no workers: it stays queued
	require.NoError(t, err)
	run, err := oncejobv1.NewRunServiceClient(r1.conn).CreateRun(as(other, "revoke-streams-run"), &oncejobv1.CreateRunRequest{Name: "crawl", Pipeline: "summarize"})
	require.NoError(t, err)
	_, err = r1.jobs.SubmitJobs(as(other, ""), &oncejobv1.SubmitJobsRequest{RunId: run.GetRun().GetId(), Items: []*oncejobv1.SubmitJobsItem{
		{IdempotencyKey: "revoke-streams-item", Request: submitReq("an item")},
	}}) // a queued item: the run is not complete, its watch stays open
	require.NoError(t, err)

	type open struct {
		name   string
		stream grpc.ClientStream
	}
	watchCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	streamsOf := func(key string) []open {
		c := func() context.Context { return metadataCtx(watchCtx, key) }
		var out []open
		for _, r := range []*replica{r1, r2} {
			wj, err := r.jobs.WatchJob(c(), &oncejobv1.WatchJobRequest{JobId: sub.GetJob().GetId()})
			require.NoError(t, err)
			wjs, err := r.jobs.WatchJobs(c(), &oncejobv1.WatchJobsRequest{})
			require.NoError(t, err)
			wr, err := oncejobv1.NewRunServiceClient(r.conn).WatchRun(c(), &oncejobv1.WatchRunRequest{RunId: run.GetRun().GetId()})
			require.NoError(t, err)
			out = append(out, open{"WatchJob", wj}, open{"WatchJobs", wjs}, open{"WatchRun", wr})
		}
		for _, o := range out {
			_, err := o.stream.Header() // established
			require.NoError(t, err, o.name)
		}
		return out
	}
	mine, others := streamsOf(revoked), streamsOf(other)
	ended := make(chan error, len(mine)+len(others))
	drain := func(s grpc.ClientStream) {
		for {
			var m emptypb.Empty // any message: only the end matters
			if err := s.RecvMsg(&m); err != nil {
				ended <- err
				return
			}
		}
	}
	for _, o := range append(mine, others...) {
		go drain(o.stream)
	}

	_, err = r2.store.APIKeyRevoke(ctx, &store.APIKeyRevokeParams{ID: prefix[len("ojk_"):]})
	require.NoError(t, err)
	revokedAt := time.Now()
	for range mine {
		err := <-ended
		// Ended by the revocation (the reason), not by the test's
		// deadline; how soon is logged (the TTL: server/tenant's tests).
		t.Logf("a revoked key's stream ended %s after the revocation", time.Since(revokedAt).Round(time.Millisecond))
		requireReason(t, err, codes.Unauthenticated, server.ReasonKeyRevoked)
	}
	select {
	case err := <-ended:
		t.Fatalf("another key's stream ended: %v", err)
	case <-time.After(2 * time.Second): // two more TTLs: its checks ran and kept it
	}
	cancel()
	for range others {
		require.Equal(t, codes.Canceled, status.Code(<-ended))
	}
}

func metadataCtx(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
}

// A dev-mode stream (no key: every caller is the default tenant's
// operator) ends with UNAUTHENTICATED once the first store key ends dev
// mode (within twice the key cache TTL; the test's deadline is a minute).
func TestDevModeStreamsEndWhenTheFirstKeyIsCreated(t *testing.T) {
	t.Parallel()
	pg := storepgtest.NewTestStore(t)
	hub, err := watch.New(watch.Config{Store: pg, PollInterval: 500 * time.Millisecond})
	require.NoError(t, err)
	hubCtx, stopHub := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { hub.Run(hubCtx); close(hubDone) }()
	t.Cleanup(func() { stopHub(); <-hubDone })
	s, err := server.New(server.Config{Store: pg, KeyStore: pg, Watch: hub, KeyCacheTTL: 500 * time.Millisecond})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = s.GRPC.Serve(lis) }()
	t.Cleanup(s.GRPC.Stop)
	t.Cleanup(hub.Shutdown)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.True(t, s.Auth.DevMode(ctx))
	w, err := oncejobv1.NewJobServiceClient(conn).WatchJobs(ctx, &oncejobv1.WatchJobsRequest{})
	require.NoError(t, err)
	_, err = w.Header()
	require.NoError(t, err, "a dev-mode stream is let in")
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := w.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	createKey(t, pg, "acme", store.RoleOperator)
	createdAt := time.Now()
	err = <-ended
	// Ended by the key, not by the minute's deadline; how soon is logged,
	// not asserted (the TTL itself: server/tenant's fake-clock tests).
	t.Logf("the dev-mode stream ended %s after the first key", time.Since(createdAt).Round(time.Millisecond))
	requireReason(t, err, codes.Unauthenticated, server.ReasonKeyRevoked)
}
