package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/store/storesqlite/storesqlitetest"
	"github.com/oncejob/oncejob/watch"
)

// runReadCounter counts the reads of a run.
type runReadCounter struct {
	watchTestStore
	reads atomic.Int64
}

func (c *runReadCounter) RunGet(ctx context.Context, p *store.RunGetParams) (*store.Run, error) {
	c.reads.Add(1)
	return c.watchTestStore.RunGet(ctx, p)
}

// TestWatchRunStreamsShareOneRead (issue #31, finding 5): 200 WatchRun
// streams on one run cost the store one read of the run per notification
// of the tenant, not one per stream: from the streams' opening until a
// change of the run reached every one of them, the run is read at most
// once plus once per notification the hub dispatched (the idle re-read is
// set out of the way). Both stores. On the server before the shared
// reader every stream read the run itself: 400 reads on Postgres and 400
// on the embedded store for the same steps.
func TestWatchRunStreamsShareOneRead(t *testing.T) {
	t.Parallel()
	const streams = 200
	for _, tc := range []struct {
		name string
		open func(t *testing.T) watchTestStore
	}{
		{"postgres", func(t *testing.T) watchTestStore { return storepgtest.NewTestStore(t) }},
		{"sqlite", func(t *testing.T) watchTestStore { return storesqlitetest.NewTestStore(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counted := &runReadCounter{watchTestStore: tc.open(t)}
			b := setupWatchOn(t, counted, func(c *watch.Config) { c.SharedIdleInterval = time.Hour })
			conn, err := grpc.NewClient(b.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			runs := oncejobv1.NewRunServiceClient(conn)
			run := createRun(t, runs, "watched", &oncejobv1.CreateRunRequest{Name: "watched", Pipeline: "summarize"})
			items := []*oncejobv1.SubmitJobsItem{
				{IdempotencyKey: "a", Request: &oncejobv1.SubmitJobRequest{Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "page a"}}}},
				{IdempotencyKey: "b", Request: &oncejobv1.SubmitJobRequest{Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "page b"}}}},
			}
			submitted, err := b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{RunId: run.GetId(), Items: items})
			require.NoError(t, err)

			readsBefore, notesBefore := counted.reads.Load(), b.hub.Notifications()
			ctx, cancel := context.WithCancel(as(keyAcme, ""))
			defer cancel()
			opened := make([]grpc.ServerStreamingClient[oncejobv1.WatchRunResponse], streams)
			for i := range opened {
				opened[i], err = runs.WatchRun(ctx, &oncejobv1.WatchRunRequest{RunId: run.GetId()})
				require.NoError(t, err)
			}
			for i, s := range opened {
				first, err := s.Recv()
				require.NoError(t, err, "stream %d", i)
				require.EqualValues(t, 2, first.GetRun().GetProgress().GetQueued(), "stream %d", i)
			}
			// A change of the run reaches every stream.
			_, err = b.client.CancelJob(as(keyAcme, ""), &oncejobv1.CancelJobRequest{JobId: submitted.GetResults()[0].GetJob().GetId()})
			require.NoError(t, err)
			for i, s := range opened {
				for {
					got, err := s.Recv()
					require.NoError(t, err, "stream %d", i)
					if got.GetRun().GetProgress().GetCancelled() == 1 {
						break
					}
				}
			}
			reads, notes := counted.reads.Load()-readsBefore, b.hub.Notifications()-notesBefore
			t.Logf("%d streams: %d reads of the run, %d notifications", streams, reads, notes)
			require.LessOrEqual(t, reads, int64(1+notes), "one read at the start and at most one per notification")
			require.Less(t, reads, int64(streams), "not a read per stream")
		})
	}
}
