package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// exerciseView is the conformance suite of store.ViewStore.
func exerciseView(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()

	type testBundle struct {
		store Store
		view  store.ViewStore
		watch store.WatchStore
		ctx   context.Context
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		s := newStore(t)
		return &testBundle{store: s, view: s, watch: s, ctx: t.Context()}
	}

	t.Run("JobCountByStatusCountsTheTenantsJobs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		var invoices []*store.Job
		for range 3 {
			invoices = append(invoices, submit(t, b.store, newSubmitParams(t)))
		}
		_, err := Complete(b.ctx, b.store, &CompleteParams{Tenant: invoices[0].Tenant, ID: invoices[0].ID, Output: []byte(`{}`)})
		require.NoError(t, err)
		other := newSubmitParams(t)
		other.Pipeline = "receipts"
		submit(t, b.store, other)
		elsewhere := newSubmitParams(t)
		elsewhere.Tenant = "tenant-b"
		submit(t, b.store, elsewhere)

		count := func(tenant, pipeline string) map[store.JobStatus]int64 {
			t.Helper()
			counts, err := b.view.JobCountByStatus(b.ctx, &store.JobCountByStatusParams{Tenant: tenant, Pipeline: pipeline})
			require.NoError(t, err)
			return counts
		}
		require.Equal(t, map[store.JobStatus]int64{store.JobStatusQueued: 3, store.JobStatusSucceeded: 1}, count("tenant-a", ""))
		require.Equal(t, map[store.JobStatus]int64{store.JobStatusQueued: 2, store.JobStatusSucceeded: 1}, count("tenant-a", "invoice"))
		require.Equal(t, map[store.JobStatus]int64{store.JobStatusQueued: 1}, count("tenant-b", ""))
		require.Empty(t, count("tenant-c", ""))
	})

	t.Run("JobChangeHeadStartsAfterWhatIsReadableAndMissesNothingLater", func(t *testing.T) {
		t.Parallel()
		b := setup(t)

		changesAfter := func(after store.JobChangeCursor) []*store.JobChange {
			t.Helper()
			var all []*store.JobChange
			params := store.JobChangeListParams{Tenant: "tenant-a", After: after}
			for {
				page, err := b.watch.JobChangeList(b.ctx, &params)
				require.NoError(t, err)
				if len(page) == 0 {
					return all
				}
				all = append(all, page...)
				params.After = page[len(page)-1].Cursor
			}
		}

		before := submit(t, b.store, newSubmitParams(t))
		require.Eventually(t, func() bool { return len(changesAfter(store.JobChangeCursor{})) == 1 },
			watchWait, 5*time.Millisecond, "the first event never became readable")

		head, err := b.view.JobChangeHead(b.ctx, &store.JobChangeHeadParams{})
		require.NoError(t, err)

		after := submit(t, b.store, newSubmitParams(t))
		_, err = Complete(b.ctx, b.store, &CompleteParams{Tenant: before.Tenant, ID: before.ID, Output: []byte(`{}`)})
		require.NoError(t, err)

		type change struct {
			job string
			seq int32
		}
		want := []change{{after.ID, 1}, {before.ID, 2}}
		var got []change
		require.Eventually(t, func() bool {
			got = got[:0]
			for _, c := range changesAfter(head) {
				got = append(got, change{c.Event.JobID, c.Event.Seq})
			}
			return len(got) >= len(want)
		}, watchWait, 5*time.Millisecond, "the changes after the head never became readable")
		require.Equal(t, want, got, "exactly the changes after the head, in commit order")
	})
}
