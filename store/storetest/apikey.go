package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// exerciseAPIKey is the conformance suite of store.APIKeyStore, of
// store.UsageStore, and of the actor an operator transition records.
func exerciseAPIKey(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()

	t.Run("CreateGetListRevoke", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()

		created, err := s.APIKeyCreate(ctx, &store.APIKeyCreateParams{ID: "aaaaaaaaaaaa", Tenant: "tenant-a", Role: store.RoleSubmitter, Name: "ci", SHA256: "11"})
		require.NoError(t, err)
		require.Equal(t, store.RoleSubmitter, created.Role)
		require.Nil(t, created.RevokedAt)
		require.Nil(t, created.LastUsedAt)
		_, err = s.APIKeyCreate(ctx, &store.APIKeyCreateParams{ID: "bbbbbbbbbbbb", Tenant: "tenant-b", Role: store.RoleOperator, SHA256: "22"})
		require.NoError(t, err)
		_, err = s.APIKeyCreate(ctx, &store.APIKeyCreateParams{ID: "aaaaaaaaaaaa", Tenant: "tenant-b", Role: store.RoleOperator, SHA256: "33"})
		require.Error(t, err, "an id is taken once")

		got, err := s.APIKeyGetByID(ctx, &store.APIKeyGetByIDParams{ID: "aaaaaaaaaaaa"})
		require.NoError(t, err)
		require.Equal(t, created, got)
		_, err = s.APIKeyGetByID(ctx, &store.APIKeyGetByIDParams{ID: "cccccccccccc"})
		require.ErrorIs(t, err, store.ErrNotFound)

		listA, err := s.APIKeyList(ctx, &store.APIKeyListParams{Tenant: "tenant-a"})
		require.NoError(t, err)
		require.Equal(t, []*store.APIKey{created}, listA)
		all, err := s.APIKeyList(ctx, &store.APIKeyListParams{})
		require.NoError(t, err)
		require.Len(t, all, 2)

		revoked, err := s.APIKeyRevoke(ctx, &store.APIKeyRevokeParams{ID: "aaaaaaaaaaaa"})
		require.NoError(t, err)
		require.NotNil(t, revoked.RevokedAt)
		again, err := s.APIKeyRevoke(ctx, &store.APIKeyRevokeParams{ID: "aaaaaaaaaaaa"})
		require.NoError(t, err)
		require.Equal(t, revoked.RevokedAt, again.RevokedAt, "a revoked key keeps its first revocation")
		_, err = s.APIKeyRevoke(ctx, &store.APIKeyRevokeParams{ID: "cccccccccccc"})
		require.ErrorIs(t, err, store.ErrNotFound)

		listA, err = s.APIKeyList(ctx, &store.APIKeyListParams{Tenant: "tenant-a"})
		require.NoError(t, err)
		require.Empty(t, listA, "revoked keys are left out unless asked for")
		listA, err = s.APIKeyList(ctx, &store.APIKeyListParams{Tenant: "tenant-a", IncludeRevoked: true})
		require.NoError(t, err)
		require.Len(t, listA, 1)
	})

	t.Run("TouchWritesAtMostOncePerInterval", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		_, err := s.APIKeyCreate(ctx, &store.APIKeyCreateParams{ID: "aaaaaaaaaaaa", Tenant: "tenant-a", Role: store.RoleSubmitter, SHA256: "11"})
		require.NoError(t, err)

		require.NoError(t, s.APIKeyTouch(ctx, &store.APIKeyTouchParams{ID: "aaaaaaaaaaaa", Every: time.Hour}))
		first, err := s.APIKeyGetByID(ctx, &store.APIKeyGetByIDParams{ID: "aaaaaaaaaaaa"})
		require.NoError(t, err)
		require.NotNil(t, first.LastUsedAt)
		require.NoError(t, s.APIKeyTouch(ctx, &store.APIKeyTouchParams{ID: "aaaaaaaaaaaa", Every: time.Hour}))
		second, err := s.APIKeyGetByID(ctx, &store.APIKeyGetByIDParams{ID: "aaaaaaaaaaaa"})
		require.NoError(t, err)
		require.Equal(t, first.LastUsedAt, second.LastUsedAt, "touched within the hour: not written again")
		require.NoError(t, s.APIKeyTouch(ctx, &store.APIKeyTouchParams{ID: "aaaaaaaaaaaa", Every: 0}))
		third, err := s.APIKeyGetByID(ctx, &store.APIKeyGetByIDParams{ID: "aaaaaaaaaaaa"})
		require.NoError(t, err)
		require.True(t, third.LastUsedAt.After(*first.LastUsedAt))
	})

	t.Run("TenantUsageCountsUnfinishedJobsAndTodaysBytes", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		queued := jobIn(t, s, store.JobStatusQueued)
		jobIn(t, s, store.JobStatusRunning)
		jobIn(t, s, store.JobStatusSucceeded)
		other := newSubmitParams(t)
		other.Tenant = "tenant-b"
		submit(t, s, other)

		u, err := s.TenantUsage(ctx, &store.TenantUsageParams{Tenant: "tenant-a", Since: time.Now().Add(-time.Hour)})
		require.NoError(t, err)
		require.Equal(t, int64(2), u.InFlight)
		require.Equal(t, 3*queued.DocumentSize, u.DocumentBytes, "every job of today counts, finished or not")
		u, err = s.TenantUsage(ctx, &store.TenantUsageParams{Tenant: "tenant-a", Since: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		require.Zero(t, u.DocumentBytes)
		u, err = s.TenantUsage(ctx, &store.TenantUsageParams{Tenant: "tenant-c", Since: time.Now().Add(-time.Hour)})
		require.NoError(t, err)
		require.Equal(t, &store.TenantUsage{}, u)
	})

	t.Run("OperatorActionRecordsItsActorOnItsEvent", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()
		who := &store.Actor{KeyPrefix: "ojk_aaaaaaaaaaaa", Role: store.RoleOperator, RPC: "/oncejob.v1.JobService/ReplayJob"}

		failed := jobIn(t, s, store.JobStatusFailed)
		res, err := s.JobReplay(ctx, &store.JobReplayParams{Tenant: failed.Tenant, ID: failed.ID, Message: "again", Actor: who})
		require.NoError(t, err)
		events := requireConsecutiveEvents(t, s, failed)
		last := events[len(events)-1]
		require.Equal(t, res.Job.Status, last.Status)
		require.Equal(t, who, last.Actor)
		for _, e := range events[:len(events)-1] {
			require.Nil(t, e.Actor, "events of submits and workers have no actor")
		}

		// A cancel asked of a running job moves no status; with an actor
		// it appends an event of its own, naming it.
		running := jobIn(t, s, store.JobStatusRunning)
		before := requireConsecutiveEvents(t, s, running)
		cancelBy := &store.Actor{KeyPrefix: "sha256:0123abcd", Role: store.RoleOperator, RPC: "/oncejob.v1.JobService/CancelJob"}
		res, err = s.JobCancel(ctx, &store.JobCancelParams{Tenant: running.Tenant, ID: running.ID, Message: "stop", Actor: cancelBy})
		require.NoError(t, err)
		require.Equal(t, store.JobStatusRunning, res.Job.Status)
		require.True(t, res.Job.CancelRequested)
		after := requireConsecutiveEvents(t, s, running)
		require.Len(t, after, len(before)+1)
		require.Equal(t, store.JobStatusRunning, after[len(after)-1].Status)
		require.Equal(t, cancelBy, after[len(after)-1].Actor)

		// A replayed key applies nothing and records nothing again.
		queued := jobIn(t, s, store.JobStatusQueued)
		idem := newIdempotency(t, "/oncejob.v1.JobService/CancelJob")
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				_, errs[i] = s.JobCancel(ctx, &store.JobCancelParams{Tenant: queued.Tenant, ID: queued.ID, Idempotency: idem, Actor: cancelBy})
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		events = requireConsecutiveEvents(t, s, queued)
		require.Len(t, events, 2, "submitted, then one cancel")
		require.Equal(t, cancelBy, events[1].Actor)
	})
}
