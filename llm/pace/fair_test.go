package pace

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func pathOf(class, tenant, group string) []fairKey {
	w := float64(interactiveWeight)
	if class == "batch" {
		w = batchWeight
	}
	return []fairKey{{class, w}, {tenant, 1}, {group, 1}}
}

func TestFairQueueATenantsSingleJobGoesBeforeAnotherTenantsRun(t *testing.T) {
	t.Parallel()
	q := newFairNode(1)
	for i := range 1000 {
		q.push(pathOf("batch", "a", "run-1"), &waiter{bytes: i})
	}
	b := &waiter{bytes: -1}
	q.push(pathOf("interactive", "b", ""), b)
	require.Same(t, b, q.ahead(1)[0], "an interactive call goes first")
	require.Same(t, b, q.pop())
	require.Equal(t, 1000, q.waiting)
}

func TestFairQueueSharesByWeightAndNeverStarves(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	q := newFairNode(1)
	// Tenant a: a big run and a few single jobs; tenant b: a small run;
	// both batch and interactive calls.
	counts := map[string]int{}
	for range 2000 {
		q.push(pathOf("batch", "a", "run-big"), &waiter{call: Call{Tenant: "a", Group: "run-big", Batch: true}})
	}
	for range 200 + rng.IntN(100) {
		q.push(pathOf("batch", "b", "run-small"), &waiter{call: Call{Tenant: "b", Group: "run-small", Batch: true}})
	}
	for range 50 {
		q.push(pathOf("interactive", "a", ""), &waiter{call: Call{Tenant: "a"}})
	}
	// The first 100 picks: interactive 8 to 1 batch while interactive
	// waits; batch picks alternate tenants.
	for range 100 {
		w := q.pop()
		counts[fmt.Sprintf("%s/%s/%t", w.call.Tenant, w.call.Group, w.call.Batch)]++
	}
	require.Equal(t, 50, counts["a//false"], "every interactive call in the first hundred")
	require.InDelta(t, 25, counts["a/run-big/true"], 1, "batch: a and b take turns")
	require.InDelta(t, 25, counts["b/run-small/true"], 1)
	// Peeking changes nothing.
	next := q.ahead(10)
	for _, w := range next {
		require.Same(t, w, q.pop())
	}
}

func TestFairQueueRemove(t *testing.T) {
	t.Parallel()
	q := newFairNode(1)
	ws := make([]*waiter, 5)
	for i := range ws {
		ws[i] = &waiter{bytes: i}
		q.push(pathOf("batch", "a", "g"), ws[i])
	}
	require.True(t, q.remove(pathOf("batch", "a", "g"), ws[2]))
	require.False(t, q.remove(pathOf("batch", "a", "g"), ws[2]))
	require.False(t, q.remove(pathOf("batch", "x", "g"), ws[1]))
	got := []int{}
	for w := q.pop(); w != nil; w = q.pop() {
		got = append(got, w.bytes)
	}
	require.Equal(t, []int{0, 1, 3, 4}, got)
	require.Zero(t, q.waiting)
	require.Empty(t, q.children)
}
