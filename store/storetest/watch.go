package storetest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// watchWait bounds how long a test waits for a notification or a change.
const watchWait = 10 * time.Second

// eventKey names one event: a job's seq in a tenant.
type eventKey struct {
	tenant, jobID string
	seq           int32
}

// exerciseWatch is the conformance suite of store.WatchStore.
func exerciseWatch(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()

	type testBundle struct {
		store Store
		watch store.WatchStore
		ctx   context.Context
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		s := newStore(t)
		return &testBundle{store: s, watch: s, ctx: t.Context()}
	}

	complete := func(t *testing.T, b *testBundle, job *store.Job, output string) {
		t.Helper()
		_, err := Complete(b.ctx, b.store, &CompleteParams{Tenant: job.Tenant, ID: job.ID, Output: []byte(output)})
		require.NoError(t, err)
	}

	// changesAfter pages through the tenant's changes after params.After
	// until a page comes back empty, asserting the cursors ascend.
	changesAfter := func(t *testing.T, b *testBundle, params store.JobChangeListParams) []*store.JobChange {
		t.Helper()
		var all []*store.JobChange
		for {
			page, err := b.watch.JobChangeList(b.ctx, &params)
			require.NoError(t, err)
			if len(page) == 0 {
				return all
			}
			for _, c := range page {
				require.True(t, params.After.Less(c.Cursor), "cursor %+v does not follow %+v", c.Cursor, params.After)
				params.After = c.Cursor
			}
			all = append(all, page...)
		}
	}

	// waitVisible waits until the tenant's change log lists n events. A
	// change is listed once no transaction that could precede it is still
	// open anywhere on the server — other tests' included — so the listing
	// may lag a commit; it never loses one.
	waitVisible := func(t *testing.T, b *testBundle, tenant string, n int) {
		t.Helper()
		require.Eventually(t, func() bool {
			return len(changesAfter(t, b, store.JobChangeListParams{Tenant: tenant})) >= n
		}, watchWait, 5*time.Millisecond, "the change log never listed %d events of %s", n, tenant)
	}

	keysOf := func(changes []*store.JobChange) []eventKey {
		keys := make([]eventKey, len(changes))
		for i, c := range changes {
			keys[i] = eventKey{c.Job.Tenant, c.Event.JobID, c.Event.Seq}
		}
		return keys
	}

	// listen starts a notification source that the test's cleanup stops,
	// waiting for its channel to close.
	listen := func(t *testing.T, b *testBundle, buffer int) <-chan store.JobEventNotification {
		t.Helper()
		ctx, cancel := context.WithCancel(b.ctx)
		notes, err := b.watch.JobEventListen(ctx, &store.JobEventListenParams{PollInterval: 50 * time.Millisecond, Buffer: buffer})
		if err != nil {
			cancel()
			require.NoError(t, err)
		}
		t.Cleanup(func() {
			cancel()
			for range notes {
				// drain until closed: the source has stopped
			}
		})
		return notes
	}

	// requireNotified receives until every event in want was notified.
	requireNotified := func(t *testing.T, notes <-chan store.JobEventNotification, want ...eventKey) {
		t.Helper()
		missing := make(map[eventKey]bool, len(want))
		for _, k := range want {
			missing[k] = true
		}
		timeout := time.After(watchWait)
		for len(missing) > 0 {
			select {
			case n, ok := <-notes:
				require.True(t, ok, "notification channel closed")
				delete(missing, eventKey{n.Tenant, n.JobID, n.Seq})
			case <-timeout:
				require.Empty(t, missing, "events not notified")
			}
		}
	}

	t.Run("JobChangeList", func(t *testing.T) {
		t.Parallel()

		t.Run("ListsTheTenantsEventsInOrderWithTheirJobsAsTheyAreNow", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			a1 := submit(t, b.store, newSubmitParams(t))
			other := newSubmitParams(t)
			other.Tenant = "tenant-b"
			b1 := submit(t, b.store, other)
			a2 := submit(t, b.store, newSubmitParams(t))
			complete(t, b, a1, `{"total": 42}`)
			waitVisible(t, b, "tenant-a", 3)
			waitVisible(t, b, "tenant-b", 1)

			changes := changesAfter(t, b, store.JobChangeListParams{Tenant: "tenant-a"})
			require.Equal(t, []eventKey{
				{"tenant-a", a1.ID, 1}, {"tenant-a", a2.ID, 1}, {"tenant-a", a1.ID, 2},
			}, keysOf(changes))
			for _, c := range changes {
				events, err := b.store.JobEventList(b.ctx, &store.JobEventListParams{Tenant: "tenant-a", JobID: c.Event.JobID, AfterSeq: c.Event.Seq - 1, Limit: 1})
				require.NoError(t, err)
				require.Equal(t, events[0], c.Event)

				now, err := b.store.JobGetByID(b.ctx, &store.JobGetByIDParams{Tenant: "tenant-a", ID: c.Event.JobID})
				require.NoError(t, err)
				now.Output = nil // not loaded
				require.Equal(t, now, c.Job)
			}
			// a1 as it is now, at its first event too.
			require.Equal(t, store.JobStatusSucceeded, changes[0].Job.Status)

			require.Equal(t, []eventKey{{"tenant-b", b1.ID, 1}},
				keysOf(changesAfter(t, b, store.JobChangeListParams{Tenant: "tenant-b"})))
			require.Empty(t, changesAfter(t, b, store.JobChangeListParams{Tenant: "tenant-c"}))
		})

		t.Run("ResumingFromACursorRepeatsAndMissesNothing", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			for range 5 {
				submit(t, b.store, newSubmitParams(t))
			}
			waitVisible(t, b, "tenant-a", 5)
			all := changesAfter(t, b, store.JobChangeListParams{Tenant: "tenant-a"})
			require.Len(t, all, 5)

			paged := changesAfter(t, b, store.JobChangeListParams{Tenant: "tenant-a", Limit: 2})
			require.Equal(t, keysOf(all), keysOf(paged))

			page, err := b.watch.JobChangeList(b.ctx, &store.JobChangeListParams{Tenant: "tenant-a", Limit: 2})
			require.NoError(t, err)
			require.Equal(t, keysOf(all[:2]), keysOf(page))

			// What commits later sorts after every cursor handed out.
			last := all[len(all)-1].Cursor
			later := submit(t, b.store, newSubmitParams(t))
			complete(t, b, later, `{}`)
			waitVisible(t, b, "tenant-a", 7)
			require.Equal(t, []eventKey{{"tenant-a", later.ID, 1}, {"tenant-a", later.ID, 2}},
				keysOf(changesAfter(t, b, store.JobChangeListParams{Tenant: "tenant-a", After: last})))
		})

		t.Run("ReadsAreBoundedInBytes", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			var ids []string
			for range 6 {
				p := newSubmitParams(t)
				p.Params = []byte(`{"blob":"` + strings.Repeat("x", 100_000) + `"}`)
				ids = append(ids, submit(t, b.store, p).ID)
			}
			waitVisible(t, b, "tenant-a", 6)
			params := store.JobChangeListParams{Tenant: "tenant-a", MaxBytes: 250_000}
			var got []string
			for {
				page, err := b.watch.JobChangeList(b.ctx, &params)
				require.NoError(t, err)
				if len(page) == 0 {
					break
				}
				var before int64 // the bytes of the page before its last change
				for i, c := range page {
					require.Greater(t, c.Bytes, int64(100_000), "a change's bytes count its params")
					if i < len(page)-1 {
						before += c.Bytes
					}
					got = append(got, c.Event.JobID)
					params.After = c.Cursor
				}
				require.Less(t, before, params.MaxBytes, "a read went on past MaxBytes")
				if len(got) < 6 {
					require.True(t, store.JobChangesFull(page, &params), "a read cut by MaxBytes must say more may follow")
				}
			}
			require.Equal(t, ids, got)

			// One change larger than MaxBytes still comes, alone.
			page, err := b.watch.JobChangeList(b.ctx, &store.JobChangeListParams{Tenant: "tenant-a", MaxBytes: 10})
			require.NoError(t, err)
			require.Len(t, page, 1)
			require.True(t, store.JobChangesFull(page, &store.JobChangeListParams{MaxBytes: 10}))
		})

		t.Run("FiltersByStatusAndPipeline", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			done := submit(t, b.store, newSubmitParams(t))
			complete(t, b, done, `{}`)
			otherParams := newSubmitParams(t)
			otherParams.Pipeline = "receipt"
			other := submit(t, b.store, otherParams)
			waitVisible(t, b, "tenant-a", 3)

			require.Equal(t, []eventKey{{"tenant-a", done.ID, 2}},
				keysOf(changesAfter(t, b, store.JobChangeListParams{Tenant: "tenant-a", Status: store.JobStatusSucceeded})))
			require.Equal(t, []eventKey{{"tenant-a", other.ID, 1}},
				keysOf(changesAfter(t, b, store.JobChangeListParams{Tenant: "tenant-a", Pipeline: "receipt"})))
			require.Equal(t, []eventKey{{"tenant-a", done.ID, 1}},
				keysOf(changesAfter(t, b, store.JobChangeListParams{Tenant: "tenant-a", Status: store.JobStatusQueued, Pipeline: done.Pipeline})))
		})

		t.Run("ConcurrentWritersAReadInOrderWithoutGapsOrRepeats", func(t *testing.T) {
			t.Parallel()
			b := setup(t)

			const writers, jobsEach = 8, 10
			var (
				mu   sync.Mutex
				want = make(map[eventKey]bool)
				wg   sync.WaitGroup
			)
			// A reader that fails returns early: its writers must still
			// end before the test does, or their t.Error panics.
			t.Cleanup(wg.Wait)
			for range writers {
				wg.Go(func() {
					for range jobsEach {
						res, err := b.store.JobSubmit(b.ctx, newSubmitParams(t))
						if err != nil {
							t.Error(err)
							return
						}
						_, err = Complete(b.ctx, b.store, &CompleteParams{Tenant: res.Job.Tenant, ID: res.Job.ID, Output: []byte(`{}`)})
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						want[eventKey{"tenant-a", res.Job.ID, 1}] = true
						want[eventKey{"tenant-a", res.Job.ID, 2}] = true
						mu.Unlock()
					}
				})
			}
			writing := make(chan struct{})
			go func() { wg.Wait(); close(writing) }()

			// Read from the last cursor while the writers run, then until
			// every event has come. The wait is bounded from the end of the
			// writing: how long the writers take depends on the machine.
			seen := make(map[eventKey]bool)
			params := store.JobChangeListParams{Tenant: "tenant-a", Limit: 7}
			var deadline time.Time
			for {
				page, err := b.watch.JobChangeList(b.ctx, &params)
				require.NoError(t, err)
				for _, c := range page {
					require.True(t, params.After.Less(c.Cursor), "cursor %+v does not follow %+v", c.Cursor, params.After)
					params.After = c.Cursor
					k := eventKey{c.Job.Tenant, c.Event.JobID, c.Event.Seq}
					require.False(t, seen[k], "event %+v listed twice", k)
					seen[k] = true
				}
				select {
				case <-writing:
					if len(seen) == 2*writers*jobsEach {
						require.Equal(t, want, seen)
						return
					}
					if deadline.IsZero() {
						deadline = time.Now().Add(watchWait)
					}
					require.True(t, time.Now().Before(deadline), "listed %d of %d events", len(seen), 2*writers*jobsEach)
				default:
				}
				if len(page) == 0 {
					// This reader polls on purpose: the test is a reader
					// racing committers from its cursor, not a wait for an
					// event. An empty page yields briefly instead of
					// spinning; how long changes nothing but CPU.
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	})

	t.Run("JobEventListen", func(t *testing.T) {
		t.Parallel()

		t.Run("NotifiesEveryEventCommittedAfterTheCall", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			notes := listen(t, b, 0)

			job := submit(t, b.store, newSubmitParams(t))
			requireNotified(t, notes, eventKey{"tenant-a", job.ID, 1})
			complete(t, b, job, `{}`)
			requireNotified(t, notes, eventKey{"tenant-a", job.ID, 2})

			other := newSubmitParams(t)
			other.Tenant = "tenant-b"
			otherJob := submit(t, b.store, other)
			requireNotified(t, notes, eventKey{"tenant-b", otherJob.ID, 1})
		})

		t.Run("NotifiesTheEnginesEvents", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			engine, ok := b.store.(store.EngineStore)
			require.True(t, ok, "%T does not implement store.EngineStore", b.store)
			notes := listen(t, b, 0)

			job := submit(t, b.store, newSubmitParams(t))
			claimed := claimOne(t, engine, "w", engineLease)
			require.Equal(t, job.ID, claimed.ID)
			_, err := Publish(b.ctx, engine, &store.JobPublishParams{Lease: leaseOf(claimed), Output: []byte(`{}`), Message: "published"})
			require.NoError(t, err)
			requireNotified(t, notes, eventKey{"tenant-a", job.ID, 1}, eventKey{"tenant-a", job.ID, 2}, eventKey{"tenant-a", job.ID, 3})
		})

		t.Run("ASlowReceiverLosesNothing", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			notes := listen(t, b, 1)

			const jobs = 20
			want := make([]eventKey, jobs)
			for i := range jobs {
				want[i] = eventKey{"tenant-a", submit(t, b.store, newSubmitParams(t)).ID, 1}
			}
			requireNotified(t, notes, want...)
		})

		t.Run("ConcurrentWritersAreAllNotified", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			notes := listen(t, b, 0)

			const writers, jobsEach = 8, 10
			keys := make(chan eventKey, writers*jobsEach)
			var wg sync.WaitGroup
			for range writers {
				wg.Go(func() {
					for range jobsEach {
						res, err := b.store.JobSubmit(b.ctx, newSubmitParams(t))
						if err != nil {
							t.Error(err)
							return
						}
						keys <- eventKey{"tenant-a", res.Job.ID, 1}
					}
				})
			}
			wg.Wait()
			close(keys)
			var want []eventKey
			for k := range keys {
				want = append(want, k)
			}
			require.Len(t, want, writers*jobsEach)
			requireNotified(t, notes, want...)
		})

		t.Run("ClosesTheChannelAfterTheContextIsDone", func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx, cancel := context.WithCancel(b.ctx)
			notes, err := b.watch.JobEventListen(ctx, &store.JobEventListenParams{})
			require.NoError(t, err)
			submit(t, b.store, newSubmitParams(t))

			cancel()
			timeout := time.After(watchWait)
			for {
				select {
				case _, ok := <-notes:
					if !ok {
						return
					}
				case <-timeout:
					t.Fatal("the channel was not closed")
				}
			}
		})
	})
}
