package failpoint

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	t.Parallel()
	pts, err := Parse("after_llm_response=kill, after_publish_commit=kill@3,before_checkpoint_write=kill%25")
	require.NoError(t, err)
	require.EqualValues(t, 1, pts["after_llm_response"].nth)
	require.EqualValues(t, 3, pts["after_publish_commit"].nth)
	require.Equal(t, 25, pts["before_checkpoint_write"].percent)
	pts, err = Parse("provider_batch_before_create=stop")
	require.NoError(t, err)
	require.True(t, pts["provider_batch_before_create"].stop)
	pts, err = Parse("provider_batch_intent=stop@50")
	require.NoError(t, err)
	require.True(t, pts["provider_batch_intent"].stop)
	require.EqualValues(t, 50, pts["provider_batch_intent"].nth)
	for _, bad := range []string{"x", "=kill", "x=kill@0", "x=kill%0", "x=kill%101", "x=pause", "x=stop@0", "x=stop@x"} {
		_, err := Parse(bad)
		require.Error(t, err, bad)
	}
}
