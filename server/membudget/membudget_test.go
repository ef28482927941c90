package membudget_test

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/server/membudget"
)

func TestBudgetNeverHoldsMoreThanItsLimit(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	b := membudget.New(1 << 20)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			var held []int64
			for range 2000 {
				n := r.Int64N(300 << 10)
				if b.TryAcquire(n) {
					require.LessOrEqual(t, b.Used(), int64(1<<20))
					held = append(held, n)
				}
				if len(held) == 3 || r.IntN(4) == 0 {
					for _, n := range held {
						b.Release(n)
					}
					held = held[:0]
				}
			}
			for _, n := range held {
				b.Release(n)
			}
		}()
	}
	wg.Wait()
	require.Zero(t, b.Used())
	require.LessOrEqual(t, b.Peak(), int64(1<<20))
	require.Positive(t, b.Refused(), "8 workers drawing up to 300 KiB each from 1 MiB never met the limit")
}

func TestRefusalIsResourceExhaustedWithReason(t *testing.T) {
	t.Parallel()
	b := membudget.New(10)
	h := b.Hold("a page")
	require.NoError(t, h.Grow(6))
	err := h.Grow(6)
	st := status.Convert(err)
	require.Equal(t, codes.ResourceExhausted, st.Code())
	var info *errdetails.ErrorInfo
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			info = d
		case *errdetails.RetryInfo:
			retry = d
		}
	}
	require.NotNil(t, info)
	require.Equal(t, membudget.ReasonMemoryBudget, info.GetReason())
	require.NotNil(t, retry)
	require.Equal(t, int64(6), h.Bytes(), "a refused Grow draws nothing")
	h.Release()
	require.Zero(t, b.Used())
}

func TestNilBudgetIsUnlimited(t *testing.T) {
	t.Parallel()
	var b *membudget.Budget
	require.True(t, b.TryAcquire(1<<40))
	require.NoError(t, b.Hold("x").Grow(1<<40))
	require.Zero(t, b.Used())
}

func TestParseBytes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"0": 0, "512": 512, "1KiB": 1024, "3MiB": 3 << 20, "2GiB": 2 << 30, "5MB": 5e6, "7B": 7} {
		got, err := membudget.ParseBytes(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "-1", "1TiB", "MiB", "1.5GiB", "99999999999999GiB"} {
		_, err := membudget.ParseBytes(in)
		require.Error(t, err, in)
	}
}
