package gateway

import (
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEventCacheEncodesOnceAndForgetsTheOldest(t *testing.T) {
	t.Parallel()
	c := newEventCache(3)
	encodes := 0
	get := func(key string) string {
		b, err := c.get(key, func() ([]byte, error) { encodes++; return []byte("json of " + key), nil })
		require.NoError(t, err)
		return string(b)
	}
	for range 5 {
		require.Equal(t, "json of a/1", get("a/1"))
	}
	require.Equal(t, 1, encodes, "encoded once")
	for i := 2; i <= 4; i++ {
		get("a/" + strconv.Itoa(i))
	}
	require.Equal(t, 4, encodes)
	require.Len(t, c.m, 3, "bounded")
	get("a/1")
	require.Equal(t, 5, encodes, "the oldest was forgotten")
	get("a/4")
	require.Equal(t, 5, encodes, "a recent one was kept")

	_, err := c.get("bad", func() ([]byte, error) { return nil, errors.New("no") })
	require.Error(t, err)
	require.NotContains(t, c.m, "bad", "a failed encoding is not kept")
}
