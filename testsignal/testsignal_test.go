package testsignal_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/testsignal"
)

func TestSignal(t *testing.T) {
	t.Parallel()

	t.Run("OffIsANoOpAndWaitFails", func(t *testing.T) {
		t.Parallel()
		var s testsignal.Signal[int]
		s.Signal(1) // must not block or panic
		_, err := s.Wait()
		require.ErrorContains(t, err, "not Init")
	})

	t.Run("DeliversInOrderAndWaitForSkips", func(t *testing.T) {
		t.Parallel()
		var s testsignal.Signal[int]
		s.Init()
		for i := range 5 {
			s.Signal(i)
		}
		v, err := s.Wait()
		require.NoError(t, err)
		require.Equal(t, 0, v)
		v, err = s.WaitFor(func(v int) bool { return v >= 3 })
		require.NoError(t, err)
		require.Equal(t, 3, v)
		v, err = s.Wait()
		require.NoError(t, err)
		require.Equal(t, 4, v)
	})
}
