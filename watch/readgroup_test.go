package watch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// A read that started before a notification is not shared with a watcher
// woken by it: that read may predate the commit.
func TestReadGroupSharesOnlyReadsStartedAfterTheWakeUp(t *testing.T) {
	t.Parallel()
	var epoch atomic.Uint64
	g := readGroup{epoch: &epoch}
	started, release := make(chan struct{}), make(chan struct{})
	var reads atomic.Int32
	read := func(context.Context) ([]*store.JobEvent, error) {
		n := reads.Add(1)
		if n == 1 {
			close(started)
			<-release
		}
		return []*store.JobEvent{{Seq: n}}, nil
	}

	first := make(chan []*store.JobEvent, 1)
	go func() {
		ev, _ := g.do(context.Background(), "k", 0, read)
		first <- ev
	}()
	<-started
	epoch.Add(1) // a notification arrives while the first read runs
	joinedOld := make(chan []*store.JobEvent, 1)
	woken := make(chan []*store.JobEvent, 1)
	go func() {
		ev, _ := g.do(context.Background(), "k", 0, read) // not woken since: may share
		joinedOld <- ev
	}()
	go func() {
		ev, _ := g.do(context.Background(), "k", epoch.Load(), read) // woken by it
		woken <- ev
	}()
	require.Eventually(t, func() bool { // both wait on the first read
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.calls["k"].waiters == 2
	}, 10*time.Second, time.Millisecond)
	close(release)
	require.Equal(t, int32(1), (<-first)[0].Seq)
	require.GreaterOrEqual(t, (<-woken)[0].Seq, int32(2), "a read started after the wake-up")
	require.Equal(t, int32(1), (<-joinedOld)[0].Seq, "shared the first read")
}
