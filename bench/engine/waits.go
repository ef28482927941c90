package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// waitSampler samples, every 50 ms, what the active backends of one
// database wait on (pg_stat_activity; none: on CPU or in the run queue).
// It reads from the postgres database, so its queries do not count in the
// measured database's statistics.
type waitSampler struct {
	mu      sync.Mutex
	counts  map[string]int
	samples int // backend samples
	polls   int
	cancel  context.CancelFunc
	done    chan struct{}
}

func startWaitSampler(ctx context.Context, pgURL, db string) *waitSampler {
	ctx, cancel := context.WithCancel(ctx)
	w := &waitSampler{counts: map[string]int{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		conn, err := pgx.Connect(ctx, pgURL+"/postgres?sslmode=disable")
		if err != nil {
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rows, err := conn.Query(ctx, `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU')
				FROM pg_stat_activity WHERE datname = $1 AND state = 'active' AND backend_type = 'client backend'`, db)
			if err != nil {
				return
			}
			waits, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return
			}
			w.mu.Lock()
			w.polls++
			for _, s := range waits {
				w.counts[s]++
				w.samples++
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// finish stops the sampler and returns the most frequent states, in
// per cent of the backend samples, and the mean number of active backends.
func (w *waitSampler) finish() string {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.samples == 0 {
		return "no active backend sampled"
	}
	type kv struct {
		k string
		n int
	}
	var all []kv
	for k, n := range w.counts {
		all = append(all, kv{k, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n || (all[i].n == all[j].n && all[i].k < all[j].k) })
	var parts []string
	for i, x := range all {
		if i == 6 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%%", x.k, 100*float64(x.n)/float64(w.samples)))
	}
	return fmt.Sprintf("%.1f active backends on average; %s", float64(w.samples)/float64(max(w.polls, 1)), strings.Join(parts, ", "))
}
