package watch_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/store/storetest"
	"github.com/oncejob/oncejob/watch"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type testBundle struct {
	store *storepg.Store
	hub   *watch.Hub
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	st := storepgtest.NewTestStore(t)
	st.TestSignals().Listening.Init()
	hub, err := watch.New(watch.Config{Store: st, PollInterval: 200 * time.Millisecond})
	require.NoError(t, err)
	hub.TestSignals().Active.Init()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { hub.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &testBundle{store: st, hub: hub}
}

func (b *testBundle) submit(t *testing.T, text string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(text))
	id := uuid.Must(uuid.NewV7()).String()
	_, err := b.store.JobSubmit(context.Background(), &store.JobSubmitParams{
		ID: id, Tenant: "acme", Method: "submit", IdempotencyKey: text, Fingerprint: text, DedupKey: "dedup:" + text,
		Pipeline: "summarize", PipelineVersion: 1, Document: []byte(text), DocumentSHA256: hex.EncodeToString(sum[:]),
		DocumentMedia: "text/plain", Params: []byte(`{}`),
	})
	require.NoError(t, err)
	return id
}

// run claims every queued job, advances it two stages and publishes it:
// seqs 2-5.
func (b *testBundle) run(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	jobs, err := b.store.JobClaim(ctx, &store.JobClaimParams{Owner: "w", Limit: n, LeaseDuration: time.Minute})
	require.NoError(t, err)
	require.Len(t, jobs, n)
	for _, stage := range []store.JobStage{store.JobStageTextExtracted, store.JobStageChunksReady} {
		for _, j := range jobs {
			require.NoError(t, storetest.CheckpointWrite(ctx, b.store, &storetest.CheckpointWriteParams{
				Lease: store.Lease{JobID: j.ID, Owner: j.LeaseOwner, Attempt: j.Attempt}, Stage: stage, Chunk: -1,
				StageKey: string(stage) + j.ID, CodeVersion: "1", Output: []byte(`{}`), AdvanceStage: true,
			}))
		}
	}
	for _, j := range jobs {
		_, err := storetest.Publish(ctx, b.store, &store.JobPublishParams{Lease: store.Lease{JobID: j.ID, Owner: j.LeaseOwner, Attempt: j.Attempt}, Output: []byte(`{}`)})
		require.NoError(t, err)
	}
}

type result struct {
	seqs []int32
	err  error
}

func (b *testBundle) watch(id string, send func(*store.JobEvent) error) <-chan result {
	out := make(chan result, 1)
	go func() {
		var r result
		r.err = b.hub.WatchJob(context.Background(), &watch.JobParams{Tenant: "acme", JobID: id}, func(e *store.JobEvent) error {
			r.seqs = append(r.seqs, e.Seq)
			return send(e)
		})
		out <- r
	}()
	return out
}

func noop(*store.JobEvent) error { return nil }

// waitActive waits until n watches run on hub.
func waitActive(t *testing.T, hub *watch.Hub, n int64) {
	t.Helper()
	_, err := hub.TestSignals().Active.WaitFor(func(v int64) bool { return v == n })
	require.NoError(t, err, "waiting for %d watches", n)
}

func TestSlowWatcherBlocksNobody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, other := b.submit(t, "a"), b.submit(t, "b")
	release := make(chan struct{})
	slow := b.watch(a, func(*store.JobEvent) error { <-release; return nil })
	fastA, fastB := b.watch(a, noop), b.watch(other, noop)
	waitActive(t, b.hub, 3)

	b.run(t, 2)
	for _, w := range []<-chan result{fastA, fastB} {
		select {
		case r := <-w:
			require.NoError(t, r.err)
			require.Equal(t, []int32{1, 2, 3, 4, 5}, r.seqs)
		case <-time.After(10 * time.Second):
			t.Fatal("a fast watcher waited for the slow one")
		}
	}
	// The slow one is still on its first event; released, it catches up
	// from the log.
	close(release)
	r := <-slow
	require.NoError(t, r.err)
	require.Equal(t, []int32{1, 2, 3, 4, 5}, r.seqs)
}

func TestShutdownEndsWatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.submit(t, "s")
	w := b.watch(id, noop)
	jobs := make(chan error, 1)
	go func() {
		jobs <- b.hub.WatchJobs(context.Background(), &store.JobChangeListParams{Tenant: "acme"}, func(*store.JobChange) error { return nil })
	}()
	waitActive(t, b.hub, 2)
	b.hub.Shutdown()
	r := <-w
	require.ErrorIs(t, r.err, watch.ErrShuttingDown)
	require.Equal(t, []int32{1}, r.seqs)
	require.ErrorIs(t, <-jobs, watch.ErrShuttingDown)
	require.ErrorIs(t, b.hub.WatchJob(context.Background(), &watch.JobParams{Tenant: "acme", JobID: id}, noop), watch.ErrShuttingDown)
}

func TestWatchJobsSeesEventsHeldBackByAnOpenTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.hub.TestSignals().Woken.Init()
	b.hub.TestSignals().ChangesRead.Init()
	got := make(chan *store.JobChange, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- b.hub.WatchJobs(ctx, &store.JobChangeListParams{Tenant: "acme"}, func(c *store.JobChange) error { got <- c; return nil })
	}()
	n, err := b.hub.TestSignals().ChangesRead.Wait() // the watcher's first read
	require.NoError(t, err)
	require.Zero(t, n)
	// The hub hears NOTIFY from now on. (Before, only the tail would find
	// the event, and it waits for the open transaction below to end.)
	_, err = b.store.TestSignals().Listening.Wait()
	require.NoError(t, err)

	// An open write transaction (started first, so its xid is lower) holds
	// back every event committed after it started.
	tx, err := b.store.Pool().Begin(context.Background())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }() // on failure too: the pool's Close waits for it
	_, err = tx.Exec(context.Background(), "SELECT pg_current_xact_id()")
	require.NoError(t, err)
	id := b.submit(t, "held")
	// The event's notification wakes the watcher, whose read must not list
	// it yet.
	_, err = b.hub.TestSignals().Woken.WaitFor(func(n store.JobEventNotification) bool { return n.JobID == id })
	require.NoError(t, err)
	n, err = b.hub.TestSignals().ChangesRead.Wait()
	require.NoError(t, err)
	require.Zero(t, n, "a change listed while an older transaction was open: a later commit could sort before it")
	require.Empty(t, got)
	require.NoError(t, tx.Rollback(context.Background()))
	select {
	case c := <-got:
		require.Equal(t, id, c.Event.JobID)
		require.Equal(t, int32(1), c.Event.Seq)
		require.Equal(t, id, c.Job.ID)
	case <-time.After(5 * time.Second):
		t.Fatal("the change never came after the transaction ended (the tail should have noticed)")
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}
