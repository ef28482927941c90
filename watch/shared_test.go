package watch_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/watch"
)

// TestWatchSharedOneReaderPerValue: the watches of one value share one
// reader; its failure reaches every one of them, and the next watch starts
// a reader of its own. A value read as done ends its watches.
func TestWatchSharedOneReaderPerValue(t *testing.T) {
	t.Parallel()
	hub, err := watch.New(watch.Config{Store: storepgtest.NewTestStore(t), SharedIdleInterval: time.Hour})
	require.NoError(t, err)
	t.Cleanup(hub.Shutdown)
	hub.TestSignals().Active.Init()
	const watches = 20
	p := &watch.SharedParams{Tenant: "acme", Key: "run:1"}
	var reads atomic.Int64
	release := make(chan struct{})
	boom := errors.New("boom")
	failing := func(context.Context) (any, bool, error) {
		reads.Add(1)
		<-release
		return nil, false, boom
	}
	var wg sync.WaitGroup
	errs := make(chan error, watches)
	for range watches {
		wg.Go(func() {
			errs <- hub.WatchShared(t.Context(), p, failing, func(any) (bool, error) { return false, nil })
		})
	}
	_, err = hub.TestSignals().Active.WaitFor(func(n int64) bool { return n == watches })
	require.NoError(t, err)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.ErrorIs(t, err, boom)
	}
	require.EqualValues(t, 1, reads.Load(), "one read for every watch")

	var got []any
	err = hub.WatchShared(t.Context(), p, func(context.Context) (any, bool, error) {
		reads.Add(1)
		return "final", true, nil
	}, func(v any) (bool, error) {
		got = append(got, v)
		return true, nil
	})
	require.NoError(t, err)
	require.Equal(t, []any{"final"}, got)
	require.EqualValues(t, 2, reads.Load(), "a new reader after the failed one")
}
