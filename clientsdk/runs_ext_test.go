package clientsdk_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/clientsdk"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// TestRunKey pins RunKey: the Python SDK's run_key must give the same key
// (clientsdk/python/tests/test_e2e.py checks the same value).
func TestRunKey(t *testing.T) {
	t.Parallel()
	k, err := clientsdk.RunKey(&oncejobv1.CreateRunRequest{Name: "nightly", Pipeline: "summarize"})
	require.NoError(t, err)
	require.Equal(t, "4a0fb4ae1b214ea8fc5e9eb0a1784ec727fc18d9eef3e4f0ebaadcd8680b040e", k)
}

// TestRunKeyProviderBatch: a provider_batch run is another intent than the
// same run without it, and the key of a run without it is the one RunKey
// always gave. The Python SDK's run_key gives the same value
// (clientsdk/python/tests/test_workid.py).
func TestRunKeyProviderBatch(t *testing.T) {
	t.Parallel()
	k, err := clientsdk.RunKey(&oncejobv1.CreateRunRequest{Name: "nightly", Pipeline: "summarize", ProviderBatch: true})
	require.NoError(t, err)
	require.Equal(t, "a804d0838e50841de376ea6fa1ea72e7e186994bcd2f13dd1fc105f193fd9b1d", k)
	plain, err := clientsdk.RunKey(&oncejobv1.CreateRunRequest{Name: "nightly", Pipeline: "summarize"})
	require.NoError(t, err)
	require.NotEqual(t, plain, k)
}
