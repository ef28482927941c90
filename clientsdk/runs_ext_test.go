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
