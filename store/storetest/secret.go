package storetest

import (
	"crypto/rand"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// exerciseSecret is the conformance suite of store.SecretStore.
func exerciseSecret(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()

	t.Run("FirstCallCreatesAndLaterCallsReturnIt", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()

		first := rand.Text()
		got, err := s.SecretGetOrCreate(ctx, &store.SecretGetOrCreateParams{Name: "page-token", Fresh: []byte(first)})
		require.NoError(t, err)
		require.Equal(t, []byte(first), got, "the first call stores fresh")

		got, err = s.SecretGetOrCreate(ctx, &store.SecretGetOrCreateParams{Name: "page-token", Fresh: []byte(rand.Text())})
		require.NoError(t, err)
		require.Equal(t, []byte(first), got, "a later call's fresh is not stored")

		other, err := s.SecretGetOrCreate(ctx, &store.SecretGetOrCreateParams{Name: "other", Fresh: []byte{0, 1, 0xff}})
		require.NoError(t, err)
		require.Equal(t, []byte{0, 1, 0xff}, other, "names are apart, and a secret is bytes, not text")
	})

	t.Run("ConcurrentCallersAgree", func(t *testing.T) {
		t.Parallel()
		s, ctx := newStore(t), t.Context()

		const callers = 8
		got := make([][]byte, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				got[i], errs[i] = s.SecretGetOrCreate(ctx, &store.SecretGetOrCreateParams{Name: "page-token", Fresh: []byte(rand.Text())})
			})
		}
		wg.Wait()
		for i := range callers {
			require.NoError(t, errs[i])
			require.Equal(t, got[0], got[i], "every caller gets the one secret stored")
		}
		again, err := s.SecretGetOrCreate(ctx, &store.SecretGetOrCreateParams{Name: "page-token", Fresh: []byte(rand.Text())})
		require.NoError(t, err)
		require.Equal(t, got[0], again)
	})
}
