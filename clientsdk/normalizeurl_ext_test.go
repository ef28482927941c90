package clientsdk_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/clientsdk"
)

// TestNormalizeURL checks the vectors the Python SDK's normalize_url
// checks too (clientsdk/testdata/normalizeurl_vectors.json).
func TestNormalizeURL(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/normalizeurl_vectors.json")
	require.NoError(t, err)
	var vectors struct {
		Normalize []struct{ In, Want string } `json:"normalize"`
		Invalid   []string                    `json:"invalid"`
	}
	require.NoError(t, json.Unmarshal(raw, &vectors))
	require.GreaterOrEqual(t, len(vectors.Normalize), 25)
	for _, tc := range vectors.Normalize {
		got, err := clientsdk.NormalizeURL(tc.In)
		require.NoError(t, err, tc.In)
		require.Equal(t, tc.Want, got, tc.In)
		again, err := clientsdk.NormalizeURL(got)
		require.NoError(t, err)
		require.Equal(t, got, again, "NormalizeURL is idempotent on %q", tc.In)
	}
	for _, bad := range vectors.Invalid {
		_, err := clientsdk.NormalizeURL(bad)
		require.Error(t, err, bad)
	}
}
