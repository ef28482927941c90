package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/server/membudget"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/watch"
)

// setupWatchWith starts a server with a running hub of cfg (its Store set
// to st) and the hub's budget as the server's.
func setupWatchWith(t *testing.T, st watchTestStore, cfg watch.Config) *watchBundle {
	t.Helper()
	keysFile := filepath.Join(t.TempDir(), "keys.yaml")
	require.NoError(t, os.WriteFile(keysFile, []byte(fmt.Sprintf("keys:\n  - tenant: acme\n    sha256: %s\n", tenant.HashKey(keyAcme))), 0o600))
	keys, err := tenant.LoadKeys(keysFile)
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(newTestWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Store, cfg.Logger = st, logger
	hub, err := watch.New(cfg)
	require.NoError(t, err)
	hub.TestSignals().Joined.Init()
	hub.TestSignals().ChangesRead.Init()
	hubCtx, stopHub := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { hub.Run(hubCtx); close(hubDone) }()
	t.Cleanup(func() { stopHub(); <-hubDone })
	s, err := server.New(server.Config{Store: st, Keys: keys, Logger: logger, Watch: hub, Memory: cfg.Budget})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = s.GRPC.Serve(lis) }()
	t.Cleanup(s.GRPC.Stop)
	t.Cleanup(hub.Shutdown)
	// Fixed flow-control windows (64 KiB, the least; setting them turns
	// off grpc-go's window growth), so a client that does not read stops
	// the server's sends after a known amount.
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &watchBundle{store: st, hub: hub, local: s.Local, client: oncejobv1.NewJobServiceClient(conn), addr: lis.Addr().String()}
}

// submitLarge submits n jobs of acme whose params are about size bytes.
func submitLarge(t *testing.T, client oncejobv1.JobServiceClient, prefix string, n, size int) {
	t.Helper()
	for i := range n {
		req := submitReq(fmt.Sprintf("%s %d", prefix, i))
		req.Params = &structpb.Struct{Fields: map[string]*structpb.Value{"pad": structpb.NewStringValue(strings.Repeat("p", size))}}
		_, err := client.SubmitJob(as(keyAcme, fmt.Sprintf("%s-%d", prefix, i)), req)
		require.NoError(t, err)
	}
}

// cutOffCursor returns the after_cursor of a watch's end, requiring the
// status and ErrorInfo reason.
func cutOffCursor(t *testing.T, err error, reason string) string {
	t.Helper()
	st := status.Convert(err)
	require.Equal(t, codes.ResourceExhausted, st.Code(), "%v", err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			require.Equal(t, reason, info.GetReason(), "%v", err)
			cursor, ok := info.GetMetadata()["after_cursor"]
			require.True(t, ok, "no after_cursor in %v", info)
			return cursor
		}
	}
	t.Fatalf("no ErrorInfo in %v", err)
	return ""
}

// recvUntilEnd receives a stream's changes until it ends, returning their
// jobs' ids in order, the last cursor and the error it ended with.
func recvUntilEnd(stream oncejobv1.JobService_WatchJobsClient) (ids []string, last string, err error) {
	for {
		resp, err := stream.Recv()
		if err != nil {
			return ids, last, err
		}
		ids = append(ids, resp.GetJob().GetId())
		last = resp.GetCursor()
	}
}

// requireEachOnce requires ids to be the n jobs of acme, each once.
func requireEachOnce(t *testing.T, b *watchBundle, ids []string, n int) {
	t.Helper()
	seen := map[string]int{}
	for _, id := range ids {
		seen[id]++
	}
	require.Len(t, seen, n, "every job's change, after resuming")
	for id, c := range seen {
		require.Equal(t, 1, c, "job %s's change came %d times", id, c)
	}
}

// TestWatchJobsSlowConsumerIsCutOffWithItsCursor (issue #31): a WatchJobs
// stream at the tail whose client stops reading while its tenant's
// changes pass the feed's bound (64 KiB here; 100 changes of about 4 KiB
// arrive) is ended, once the client reads again, with RESOURCE_EXHAUSTED,
// ErrorInfo SLOW_CONSUMER and after_cursor = the cursor of the last change
// it was sent; a watch from that cursor gets every remaining change: each
// change once over the two streams.
func TestWatchJobsSlowConsumerIsCutOffWithItsCursor(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st server.Store) {
		b := setupWatchWith(t, st.(watchTestStore), watch.Config{FeedBytes: 64 << 10})
		// Bounded, so that a stream never cut fails the test, not its
		// deadline.
		ctx, cancel := context.WithTimeout(as(keyAcme, ""), 2*time.Minute)
		defer cancel()
		stream, err := b.client.WatchJobs(ctx, &oncejobv1.WatchJobsRequest{})
		require.NoError(t, err)
		tenantName, err := b.hub.TestSignals().Joined.Wait()
		require.NoError(t, err)
		require.Equal(t, "acme", tenantName)

		const n = 100
		submitLarge(t, b.client, "slow", n, 4<<10) // the client reads none meanwhile
		// And none until the hub has read them all: read while the hub
		// still reads (a loaded machine), the client would keep up and
		// never be cut off (a CI run hung here).
		for read := 0; read < n; {
			got, err := b.hub.TestSignals().ChangesRead.Wait()
			require.NoError(t, err)
			read += got
		}
		first, last, err := recvUntilEnd(stream)
		cursor := cutOffCursor(t, err, server.ReasonSlowConsumer)
		require.NotEmpty(t, first, "the changes sent before the cut")
		require.Less(t, len(first), n, "the stream was cut before the end")
		require.Equal(t, last, cursor, "after_cursor is the last change sent")

		resumed, err := b.client.WatchJobs(ctx, &oncejobv1.WatchJobsRequest{AfterCursor: cursor})
		require.NoError(t, err)
		var rest []string
		for len(first)+len(rest) < n {
			resp, err := resumed.Recv()
			require.NoError(t, err)
			rest = append(rest, resp.GetJob().GetId())
		}
		requireEachOnce(t, b, append(first, rest...), n)
	})
}

// TestWatchJobsMemoryBudgetCutsOffWithItsCursor (issue #31): a WatchJobs
// stream from a cursor (ListJobs' watch_cursor after 20 jobs; 60 more
// after it) whose read the memory budget cannot hold — the test holds all
// of it but 16 KiB, less than one read's 256 KiB — ends with
// RESOURCE_EXHAUSTED, ErrorInfo MEMORY_BUDGET and after_cursor = where it
// stood, having sent nothing; once the budget is free again, a watch from
// that cursor gets each of the 60 changes once.
func TestWatchJobsMemoryBudgetCutsOffWithItsCursor(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st server.Store) {
		budget := membudget.New(64 << 20)
		b := setupWatchWith(t, st.(watchTestStore), watch.Config{ReadBytes: 256 << 10, Budget: budget})
		submitLarge(t, b.client, "before", 20, 4<<10)
		page, err := b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{PageSize: 1})
		require.NoError(t, err)
		from := page.GetWatchCursor()
		require.NotEmpty(t, from)
		const n = 60
		submitLarge(t, b.client, "after", n, 4<<10)

		taken := budget.Hold("the test")
		require.NoError(t, taken.Grow(budget.Limit()-budget.Used()-16<<10))
		ctx, cancel := context.WithCancel(as(keyAcme, ""))
		defer cancel()
		stream, err := b.client.WatchJobs(ctx, &oncejobv1.WatchJobsRequest{AfterCursor: from})
		require.NoError(t, err)
		ids, _, err := recvUntilEnd(stream)
		require.Empty(t, ids, "nothing sent: the first read did not fit")
		require.Equal(t, from, cutOffCursor(t, err, membudget.ReasonMemoryBudget), "after_cursor is where the stream stood")

		taken.Release()
		resumed, err := b.client.WatchJobs(ctx, &oncejobv1.WatchJobsRequest{AfterCursor: from})
		require.NoError(t, err)
		for len(ids) < n {
			resp, err := resumed.Recv()
			require.NoError(t, err)
			ids = append(ids, resp.GetJob().GetId())
		}
		requireEachOnce(t, b, ids, n)
	})
}
