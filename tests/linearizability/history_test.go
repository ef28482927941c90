package linearizability

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestReached: a Reached channel closes when, and only when, its count of
// operations with its outcome is recorded, from any goroutine; one asked
// for after the count is closed at once; Counts agrees.
func TestReached(t *testing.T) {
	h := NewHistory()
	zero := h.Reached(Created, 0)
	two := h.Reached(Created, 2)
	failed := h.Reached(Failed, 1)
	require.True(t, closed(zero))

	h.Record(0, Input{Op: Submit, Key: "k"}, func() Output { return Output{Outcome: Created, JobID: "a"} })
	h.Record(0, Input{Op: Submit, Key: "k"}, func() Output { return Output{Outcome: Existing, JobID: "a"} })
	require.False(t, closed(two), "one Created is not two")
	h.Record(1, Input{Op: Submit, Key: "j"}, func() Output { return Output{Outcome: Created, JobID: "b"} })
	require.True(t, closed(two))
	require.False(t, closed(failed))
	require.True(t, closed(h.Reached(Created, 2)), "a count already reached")

	many := h.Reached(Created, 2+50*8)
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for range 50 {
				h.Record(c, Input{Op: Submit}, func() Output { return Output{Outcome: Created} })
			}
		})
	}
	wg.Wait()
	require.True(t, closed(many))
	require.False(t, closed(failed))
	require.Equal(t, map[Outcome]int{Created: 402, Existing: 1}, h.Counts())
}
