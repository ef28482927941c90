package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/store/storetest"
)

// replica is one running `oncejob serve`.
type replica struct {
	addr   string
	client oncejobv1.JobServiceClient
	// stop sends SIGTERM and waits for a clean exit.
	stop func()
}

// serveOn starts the real binary on databaseURL without workers: the tests
// make the transitions themselves, through the store.
func serveOn(t *testing.T, databaseURL string, extraArgs ...string) *replica {
	t.Helper()
	addr := freeAddr(t)
	args := append([]string{"serve", "--database-url", databaseURL, "--grpc-addr", addr, "--workers", "0"}, extraArgs...)
	p := start(t, "serve "+addr, nil, args...)
	t.Cleanup(p.stop)
	waitHealthy(t, p, addr)
	return &replica{addr: addr, client: dialJobs(t, addr), stop: p.stop}
}

// watchCluster is two replicas on one schema and a store on it for the test's
// own transitions.
type watchCluster struct {
	url      string
	replicas []*replica
	store    *storepg.Store
}

func newWatchCluster(t *testing.T) *watchCluster {
	t.Helper()
	u := storepgtest.NewMigratedSchemaURL(t)
	a := serveOn(t, u, "--migrate")
	b := serveOn(t, u)
	st, err := storepg.Open(context.Background(), u)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return &watchCluster{url: u, replicas: []*replica{a, b}, store: st}
}

func (c *watchCluster) submit(t *testing.T, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		resp, err := c.replicas[i%2].client.SubmitJob(
			metadata.AppendToOutgoingContext(context.Background(), "idempotency-key", fmt.Sprintf("watch-%d", i)),
			&oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: fmt.Sprintf("document %d", i)}}})
		require.NoError(t, err)
		ids[i] = resp.GetJob().GetId()
	}
	return ids
}

// steps returns the transitions after submission of n claimed jobs: four
// stage checkpoints, then publish. Each step moves every job once.
func (c *watchCluster) steps(t *testing.T, n int) []func() {
	t.Helper()
	ctx := context.Background()
	jobs, err := c.store.JobClaim(ctx, &store.JobClaimParams{Owner: "e2e", Limit: n, LeaseDuration: time.Minute})
	require.NoError(t, err)
	require.Len(t, jobs, n)
	var steps []func()
	for _, stage := range []store.JobStage{store.JobStageTextExtracted, store.JobStageChunksReady, store.JobStageLLMDone, store.JobStageValidated} {
		steps = append(steps, func() {
			for _, j := range jobs {
				require.NoError(t, storetest.CheckpointWrite(ctx, c.store, &storetest.CheckpointWriteParams{
					Lease: store.Lease{JobID: j.ID, Owner: j.LeaseOwner, Attempt: j.Attempt}, Stage: stage, Chunk: -1,
					StageKey: string(stage) + j.ID, CodeVersion: "1", Output: []byte(`{}`), AdvanceStage: true, Message: string(stage),
				}))
			}
		})
	}
	return append(steps, func() {
		for _, j := range jobs {
			_, err := storetest.Publish(ctx, c.store, &store.JobPublishParams{
				Lease: store.Lease{JobID: j.ID, Owner: j.LeaseOwner, Attempt: j.Attempt}, Output: []byte(`{"summary":"s"}`), Message: "published",
			})
			require.NoError(t, err)
		}
	})
}

// eventsOf is what a finished watch saw, or how it failed.
type eventsOf struct {
	events []string
	err    error
}

// watch starts WatchJob on r and returns a channel of its outcome. Events
// are compared as "seq status stage attempt message time".
func watchJob(r *replica, id string, after int32) <-chan eventsOf {
	out := make(chan eventsOf, 1)
	go func() {
		var got eventsOf
		defer func() { out <- got }()
		stream, err := r.client.WatchJob(context.Background(), &oncejobv1.WatchJobRequest{JobId: id, AfterSeq: after})
		if err != nil {
			got.err = err
			return
		}
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				got.err = err
				return
			}
			e := resp.GetEvent()
			got.events = append(got.events, fmt.Sprintf("%d %s %s %d %s %s", e.GetSeq(), e.GetStatus(), e.GetStage(), e.GetAttempt(), e.GetMessage(), e.GetTime().AsTime().Format(time.RFC3339Nano)))
		}
	}()
	return out
}

// requireSameComplete checks that every watch ended OK after n events in
// seq order, the last SUCCEEDED, and that the watches of one job
// (consecutive, one per replica) saw identical events.
func requireSameComplete(t *testing.T, watches []<-chan eventsOf, n int) {
	t.Helper()
	var prev []string
	for i, w := range watches {
		select {
		case got := <-w:
			require.NoError(t, got.err, "watch %d", i)
			require.Len(t, got.events, n, "watch %d: %v", i, got.events)
			for s, e := range got.events {
				require.True(t, strings.HasPrefix(e, fmt.Sprintf("%d ", s+1)), "watch %d: %v", i, got.events)
			}
			require.Contains(t, got.events[n-1], "JOB_STATUS_SUCCEEDED")
			if i%2 == 1 {
				require.Equal(t, prev, got.events, "the two replicas' watches of job %d", i/2)
			}
			prev = got.events
		case <-time.After(30 * time.Second):
			t.Fatalf("watch %d did not end", i)
		}
	}
}

func TestWatchTwoReplicasSeeEveryTransition(t *testing.T) {
	t.Parallel()
	c := newWatchCluster(t)
	ids := c.submit(t, 3)
	var watches []<-chan eventsOf
	for _, id := range ids {
		for _, r := range c.replicas {
			watches = append(watches, watchJob(r, id, 0))
		}
	}
	for _, step := range c.steps(t, len(ids)) {
		// A pause, not a wait: spaced transitions reach the watchers
		// live; the checks hold for any spacing.
		time.Sleep(50 * time.Millisecond)
		step()
	}
	requireSameComplete(t, watches, 7)
}

func TestWatchSurvivesKilledListenConnection(t *testing.T) {
	t.Parallel()
	c := newWatchCluster(t)
	ids := c.submit(t, 3)
	var watches []<-chan eventsOf
	for _, id := range ids {
		for _, r := range c.replicas {
			watches = append(watches, watchJob(r, id, 0))
		}
	}
	schema := schemaOf(t, c.url)
	admin, err := pgx.Connect(context.Background(), storepgtest.DatabaseURL())
	require.NoError(t, err)
	defer admin.Close(context.Background())
	// Both replicas' LISTEN connections, found by application name and the
	// schema in their channel.
	listeners := func(kill bool) int {
		fn := "pid"
		if kill {
			fn = "pg_terminate_backend(pid)"
		}
		rows, err := admin.Query(context.Background(),
			"SELECT "+fn+" FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN %' AND query LIKE '%' || $2 || '%'",
			storepg.ListenerApplicationName, schema)
		require.NoError(t, err)
		n := 0
		for rows.Next() {
			n++
		}
		require.NoError(t, rows.Err())
		return n
	}
	for _, step := range c.steps(t, len(ids)) {
		require.Eventually(t, func() bool { return listeners(false) == 2 }, 60*time.Second, 20*time.Millisecond, "both replicas listen")
		require.Equal(t, 2, listeners(true))
		step() // while neither replica listens
	}
	requireSameComplete(t, watches, 7)
}

func TestWatchResumesOnAnotherReplicaAfterShutdown(t *testing.T) {
	t.Parallel()
	c := newWatchCluster(t)
	id := c.submit(t, 1)[0]
	steps := c.steps(t, 1)
	steps[0]()

	// Watch on A; A shuts down mid-stream and says where to resume.
	stream, err := c.replicas[0].client.WatchJob(context.Background(), &oncejobv1.WatchJobRequest{JobId: id})
	require.NoError(t, err)
	var seen []int32
	for range 3 {
		resp, err := stream.Recv()
		require.NoError(t, err)
		seen = append(seen, resp.GetEvent().GetSeq())
	}
	require.Equal(t, []int32{1, 2, 3}, seen)
	stopped := make(chan struct{})
	go func() { c.replicas[0].stop(); close(stopped) }()
	_, err = stream.Recv()
	st := status.Convert(err)
	require.Equal(t, codes.Unavailable, st.Code(), st.Message())
	after := ""
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "SERVER_SHUTTING_DOWN" {
			after = info.GetMetadata()["after_seq"]
		}
	}
	require.Equal(t, "3", after, st.Message())
	select {
	case <-stopped:
	case <-time.After(15 * time.Second):
		t.Fatal("replica A did not stop: GracefulStop hung on a watch")
	}

	// More happens; the client resumes on B from seq 3 and gets exactly the
	// rest.
	steps[1]()
	w := watchJob(c.replicas[1], id, 3)
	for _, step := range steps[2:] {
		time.Sleep(20 * time.Millisecond) // a pause between transitions, as above
		step()
	}
	got := <-w
	require.NoError(t, got.err)
	require.Len(t, got.events, 4, "%v", got.events)
	for i, e := range got.events {
		require.True(t, strings.HasPrefix(e, fmt.Sprintf("%d ", 4+i)), "%v", got.events)
	}
}

func schemaOf(t *testing.T, databaseURL string) string {
	t.Helper()
	u, err := url.Parse(databaseURL)
	require.NoError(t, err)
	s := u.Query().Get("search_path")
	require.NotEmpty(t, s)
	return s
}

// TestWatchTwoReplicasAndASeparateWorker runs the jobs with a real `oncejob
// worker` process: watchers on both API replicas see every transition it
// commits, identical and in order: submitted, claimed, published (a stage
// the worker passes while running is no transition).
func TestWatchTwoReplicasAndASeparateWorker(t *testing.T) {
	t.Parallel()
	c := newWatchCluster(t)
	ids := c.submit(t, 5)
	var watches []<-chan eventsOf
	for _, id := range ids {
		for _, r := range c.replicas {
			watches = append(watches, watchJob(r, id, 0))
		}
	}
	sim := startSim(t)
	w := start(t, "worker", nil, workerArgs(c.url, sim, writeFile(t, "pipelines.yaml", killPipelines), "--workers", "2", "--lease-duration", "30s")...)
	requireSameComplete(t, watches, 3)
	w.stop()
	require.EqualValues(t, len(ids), sim.stats(t).BilledCalls)
}
