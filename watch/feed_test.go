package watch_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/server/membudget"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/watch"
)

// countingStore counts the change log's reads.
type countingStore struct {
	store.WatchStore
	changeReads atomic.Int64
}

func (c *countingStore) JobChangeList(ctx context.Context, p *store.JobChangeListParams) ([]*store.JobChange, error) {
	c.changeReads.Add(1)
	return c.WatchStore.JobChangeList(ctx, p)
}

type feedBundle struct {
	*testBundle
	counted *countingStore
}

func setupFeed(t *testing.T, configure func(*watch.Config)) *feedBundle {
	t.Helper()
	st := storepgtest.NewTestStore(t)
	st.TestSignals().Listening.Init()
	counted := &countingStore{WatchStore: st}
	cfg := watch.Config{Store: counted, PollInterval: 200 * time.Millisecond} // the tail notifies too, and is counted
	configure(&cfg)
	hub, err := watch.New(cfg)
	require.NoError(t, err)
	hub.TestSignals().Joined.Init()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { hub.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	_, err = st.TestSignals().Listening.Wait()
	require.NoError(t, err)
	return &feedBundle{testBundle: &testBundle{store: st, hub: hub}, counted: counted}
}

// watchJobs runs a WatchJobs stream of tenant acme from after; its changes
// go to got, its end to the returned channel.
func (b *feedBundle) watchJobs(ctx context.Context, after store.JobChangeCursor, send func(*store.JobChange) error) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- b.hub.WatchJobs(ctx, &store.JobChangeListParams{Tenant: "acme", After: after}, send)
	}()
	return done
}

// TestWatchJobsStreamsShareOneReadPerNotification: N streams at a tenant's
// tail cost the store one read per notification, not N (issue #31,
// finding 5: each stream used to re-read the log on every event of its
// tenant). On the old hub this reads about streams × events times.
func TestWatchJobsStreamsShareOneReadPerNotification(t *testing.T) {
	t.Parallel()
	b := setupFeed(t, func(*watch.Config) {})
	const streams, jobs = 40, 10
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	seen := map[int]int{}
	all := make(chan struct{})
	var ends []<-chan error
	for i := range streams {
		ends = append(ends, b.watchJobs(ctx, store.JobChangeCursor{}, func(*store.JobChange) error {
			mu.Lock()
			defer mu.Unlock()
			seen[i]++
			if len(seen) == streams && func() bool {
				for _, n := range seen {
					if n < jobs {
						return false
					}
				}
				return true
			}() {
				close(all)
			}
			return nil
		}))
	}
	for range streams {
		_, err := b.hub.TestSignals().Joined.Wait()
		require.NoError(t, err)
	}
	readsBefore, notesBefore := b.counted.changeReads.Load(), b.hub.Notifications()
	for i := range jobs {
		b.submit(t, "share-"+string(rune('a'+i)))
	}
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		t.Fatal("not every stream saw every job")
	}
	reads, notes := b.counted.changeReads.Load()-readsBefore, b.hub.Notifications()-notesBefore
	t.Logf("%d streams, %d jobs: %d notifications, %d reads of the change log", streams, jobs, notes, reads)
	// The joins' wake-ups may still be read after the count started: one
	// read each at most, and the feed folds them.
	require.LessOrEqual(t, reads, int64(notes)+2, "more than one read per notification: the streams do not share their reads")
	cancel()
	for _, end := range ends {
		require.ErrorIs(t, <-end, context.Canceled)
	}
}

// TestNonReadingWatchesHoldABoundedAmount: streams whose clients never
// read hold a bounded number of bytes (their batch is bounded by
// Config.ReadBytes, drawn from the budget), not the whole backlog of
// large jobs each (issue #31, finding 2: 12 such streams took a server
// from 32 MB to 1.18 GB). Not parallel: it measures the heap.
func TestNonReadingWatchesHoldABoundedAmount(t *testing.T) {
	budget := membudget.New(64 << 20)
	b := setupFeed(t, func(c *watch.Config) {
		c.ReadBytes = 256 << 10
		c.FeedBytes = 1 << 20
		c.Budget = budget
	})
	const streams, jobs, paramBytes = 12, 120, 64 << 10
	blob := strings.Repeat("x", paramBytes)
	for i := range jobs {
		submitParams(t, b.store, "big-"+string(rune('A'+i%26))+string(rune('a'+i/26)), `{"blob":"`+blob+`"}`)
	}
	// Every job readable first (a change waits for older transactions on
	// the server to end), so that each stream has the whole backlog to read.
	require.Eventually(t, func() bool {
		changes, err := b.store.JobChangeList(context.Background(), &store.JobChangeListParams{Tenant: "acme", MaxBytes: 1 << 30})
		return err == nil && len(changes) == jobs
	}, 30*time.Second, 20*time.Millisecond)
	heapBefore := heapInUse()
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var blocked sync.WaitGroup
	blocked.Add(streams)
	var ends []<-chan error
	for range streams {
		var once sync.Once
		ends = append(ends, b.watchJobs(ctx, store.JobChangeCursor{}, func(*store.JobChange) error {
			once.Do(blocked.Done)
			<-release // a client that does not read
			return nil
		}))
	}
	blocked.Wait()
	held := heapInUse() - heapBefore
	t.Logf("%d non-reading streams over %d jobs of %d KiB params: heap +%d KiB, budget held %d KiB (peak %d KiB)",
		streams, jobs, paramBytes>>10, held>>10, budget.Used()>>10, budget.Peak()>>10)
	// Each holds at most its read's bound plus the one change past it.
	perStream := int64(256<<10) + paramBytes + 4096
	require.LessOrEqual(t, budget.Used(), streams*perStream)
	// The whole backlog, 7.7 MiB, held by each stream would be 92 MiB;
	// a batch of 1 MiB each (the store's default bound alone) 12 MiB.
	require.Less(t, held, int64(10<<20), "non-reading streams hold more than their bounded batch")
	close(release)
	cancel()
	for _, end := range ends {
		require.ErrorIs(t, <-end, context.Canceled)
	}
	require.Zero(t, budget.Used(), "the streams gave back what they held")
}

// TestASlowStreamAtTheTailIsCutOff: a stream at the tail whose client
// stops reading while its tenant's changes go on holds one change, and
// once it reads again it ends with ErrSlowConsumer (the feed dropped what
// it had not sent), to resume from its cursor; a reading stream of the
// same tenant is not disturbed.
func TestASlowStreamAtTheTailIsCutOff(t *testing.T) {
	t.Parallel()
	budget := membudget.New(64 << 20)
	b := setupFeed(t, func(c *watch.Config) {
		c.ReadBytes = 64 << 10
		c.FeedBytes = 256 << 10
		c.Budget = budget
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var slowSent []store.JobChangeCursor
	slow := b.watchJobs(ctx, store.JobChangeCursor{}, func(c *store.JobChange) error {
		slowSent = append(slowSent, c.Cursor)
		once.Do(func() { close(stalled); <-release })
		return nil
	})
	var fastSeen atomic.Int64
	fast := b.watchJobs(ctx, store.JobChangeCursor{}, func(*store.JobChange) error { fastSeen.Add(1); return nil })
	for range 2 {
		_, err := b.hub.TestSignals().Joined.Wait()
		require.NoError(t, err)
	}
	const jobs = 20
	blob := strings.Repeat("y", 32<<10)
	for i := range jobs {
		submitParams(t, b.store, "slow-"+string(rune('a'+i)), `{"blob":"`+blob+`"}`)
	}
	<-stalled
	require.Eventually(t, func() bool { return fastSeen.Load() == jobs }, 30*time.Second, 10*time.Millisecond)
	// 20 changes of 32 KiB went by a feed that keeps 256 KiB.
	require.LessOrEqual(t, budget.Used(), int64(256<<10)+2*(64<<10)+2*(40<<10))
	close(release)
	err := <-slow
	require.ErrorIs(t, err, watch.ErrSlowConsumer)
	require.Len(t, slowSent, 1)

	// It resumes from its last cursor and misses nothing.
	var resumed []store.JobChangeCursor
	rctx, rcancel := context.WithCancel(context.Background())
	end := b.watchJobs(rctx, slowSent[0], func(c *store.JobChange) error {
		resumed = append(resumed, c.Cursor)
		if len(resumed) == jobs-1 {
			rcancel()
		}
		return nil
	})
	require.ErrorIs(t, <-end, context.Canceled)
	require.Len(t, resumed, jobs-1)
	require.True(t, slowSent[0].Less(resumed[0]))
	cancel()
	require.ErrorIs(t, <-fast, context.Canceled)
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// submitParams submits a job of tenant acme with params.
func submitParams(t *testing.T, st *storepg.Store, key, params string) {
	t.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	_, err := st.JobSubmit(context.Background(), &store.JobSubmitParams{
		ID: id, Tenant: "acme", Method: "submit", IdempotencyKey: key, Fingerprint: key, DedupKey: "dedup:" + key,
		Pipeline: "summarize", PipelineVersion: 1, Document: []byte(key), DocumentSHA256: strings.Repeat("0", 64),
		DocumentMedia: "text/plain", Params: []byte(params),
	})
	require.NoError(t, err)
}
