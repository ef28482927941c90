// Package tenant authenticates callers and carries their tenant in the
// context. API keys map to tenants; the server keeps only the sha256 of each
// key, so a leaked keys file does not leak keys.
package tenant

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DevTenant is the tenant of every caller when no keys are configured.
const DevTenant = "default"

type ctxKey struct{}

// FromContext returns the authenticated tenant.
func FromContext(ctx context.Context) (string, bool) {
	t, ok := ctx.Value(ctxKey{}).(string)
	return t, ok
}

// NewContext returns ctx carrying tenant.
func NewContext(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, ctxKey{}, tenant)
}

// Keys maps the sha256 of API keys to tenants. The zero value has no keys:
// dev mode, every caller is DevTenant.
type Keys struct {
	byHash map[[sha256.Size]byte]string
}

// DevMode reports whether no keys are configured.
func (k *Keys) DevMode() bool { return len(k.byHash) == 0 }

// HashKey returns the hex sha256 of an API key, the form a keys file holds.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

var (
	tenantRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)
	hashRE   = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// LoadKeys reads a keys file:
//
//	keys:
//	  - tenant: acme
//	    sha256: <hex sha256 of the key>   # oncejob hash-key prints it
func LoadKeys(path string) (*Keys, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Keys []struct {
			Tenant string `yaml:"tenant"`
			SHA256 string `yaml:"sha256"`
		} `yaml:"keys"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	k := &Keys{byHash: map[[sha256.Size]byte]string{}}
	for i, e := range doc.Keys {
		if !tenantRE.MatchString(e.Tenant) {
			return nil, fmt.Errorf("%s: keys[%d]: tenant must match %s", path, i, tenantRE)
		}
		if !hashRE.MatchString(e.SHA256) {
			return nil, fmt.Errorf("%s: keys[%d]: sha256 must be 64 lowercase hex digits", path, i)
		}
		var h [sha256.Size]byte
		_, _ = hex.Decode(h[:], []byte(e.SHA256))
		k.byHash[h] = e.Tenant
	}
	if len(k.byHash) == 0 {
		return nil, fmt.Errorf("%s: no keys", path)
	}
	return k, nil
}

// AuthFunc returns the go-grpc-middleware auth function: it reads
// `authorization: Bearer <key>` and puts the key's tenant in the context. In
// dev mode every caller is DevTenant.
func (k *Keys) AuthFunc() auth.AuthFunc {
	return func(ctx context.Context) (context.Context, error) {
		if k.DevMode() {
			return NewContext(ctx, DevTenant), nil
		}
		key, err := auth.AuthFromMD(ctx, "bearer")
		if err != nil {
			return nil, err // already an Unauthenticated status
		}
		tenant, ok := k.byHash[sha256.Sum256([]byte(key))]
		if !ok {
			return nil, status.Error(codes.Unauthenticated, "unknown API key")
		}
		return NewContext(ctx, tenant), nil
	}
}
