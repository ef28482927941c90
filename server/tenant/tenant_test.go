package tenant_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/server/tenant"
)

func writeKeys(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

// authAs runs the keys' auth function for a caller with the authorization
// header value (none when empty).
func authAs(keys *tenant.Keys, authorization string) (string, error) {
	ctx := context.Background()
	if authorization != "" {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", authorization))
	}
	ctx, err := keys.AuthFunc()(ctx)
	if err != nil {
		return "", err
	}
	got, ok := tenant.FromContext(ctx)
	if !ok {
		return "", fmt.Errorf("no tenant in the context")
	}
	return got, nil
}

func TestKeys(t *testing.T) {
	t.Parallel()

	t.Run("AKeyAuthenticatesItsTenant", func(t *testing.T) {
		t.Parallel()
		keys, err := tenant.LoadKeys(writeKeys(t, fmt.Sprintf("keys:\n  - tenant: acme\n    sha256: %s\n  - tenant: globex\n    sha256: %s\n",
			tenant.HashKey("acme-secret"), tenant.HashKey("globex-secret"))))
		require.NoError(t, err)
		require.False(t, keys.DevMode())

		got, err := authAs(keys, "Bearer acme-secret")
		require.NoError(t, err)
		require.Equal(t, "acme", got)
		got, err = authAs(keys, "bearer globex-secret")
		require.NoError(t, err)
		require.Equal(t, "globex", got)

		for _, authorization := range []string{"", "Bearer wrong", "Basic acme-secret", "Bearer " + tenant.HashKey("acme-secret")} {
			_, err := authAs(keys, authorization)
			require.Equal(t, codes.Unauthenticated, status.Code(err), "authorization %q", authorization)
		}
	})

	t.Run("NoKeysIsDevMode", func(t *testing.T) {
		t.Parallel()
		keys := &tenant.Keys{}
		require.True(t, keys.DevMode())
		for _, authorization := range []string{"", "Bearer anything"} {
			got, err := authAs(keys, authorization)
			require.NoError(t, err)
			require.Equal(t, tenant.DevTenant, got)
		}
	})

	t.Run("ABadKeysFileIsRefused", func(t *testing.T) {
		t.Parallel()
		hash := tenant.HashKey("k")
		for body, want := range map[string]string{
			"keys: []\n": "no keys",
			"keys:\n  - tenant: acme\n    sha256: abc\n":                       "sha256 must be 64 lowercase hex digits",
			"keys:\n  - tenant: ACME " + hash + "\n    sha256: " + hash + "\n": "letters, digits",
			"keys:\n  - tenant: -acme\n    sha256: " + hash + "\n":             "letters, digits",
			"keys:\n  - tenant: default\n    sha256: " + hash + "\n":           "reserved for dev mode",
			"keys:\n  - tenant: Default\n    sha256: " + hash + "\n":           "reserved for dev mode",
			"keys: [\n": "yaml",
			"keys:\n  - tenant: acme\n    sha256: " + hash + "\n    role: admin\n": "role must be submitter or operator",
			"keys:\n  - tenant: acme\n    sha256: " + hash[:63] + "A\n":            "sha256 must be",
		} {
			_, err := tenant.LoadKeys(writeKeys(t, body))
			require.ErrorContains(t, err, want, "file %q", body)
		}
		_, err := tenant.LoadKeys(filepath.Join(t.TempDir(), "missing.yaml"))
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}

func ExampleHashKey() {
	// A keys file holds only the sha256 of each key; `oncejob hash-key`
	// prints it.
	fmt.Println(tenant.HashKey("my-secret-key"))
	// Output: 1311f8fc80a7ea28d78dd7723f09c44c1754cd35160ca8e7133ae3d7f636a19a
}
