// Package tenant authenticates callers and carries who they are in the
// context: their tenant, their role and the display prefix of their key.
// Keys come from a keys file (LoadKeys) and from the store
// (store.APIKeyStore, `oncejob keys create`); the server keeps only the
// sha256 of each key, so a leaked keys file or table does not leak keys.
package tenant

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/oncejob/oncejob/store"
)

// DevTenant is the tenant of every caller when no keys are configured.
const DevTenant = "default"

// DevKeyPrefix names the caller in dev mode, where there is no key.
const DevKeyPrefix = "dev-mode"

// Principal is an authenticated caller.
type Principal struct {
	Tenant string
	Role   store.Role
	// KeyPrefix names the key for people (audit events, logs, `oncejob keys
	// list`): ojk_<id> for a store key, sha256:<8 hex> for a file key. It
	// never holds the secret.
	KeyPrefix string
}

type ctxKey struct{}

// FromContext returns the authenticated tenant.
func FromContext(ctx context.Context) (string, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p.Tenant, ok
}

// PrincipalFromContext returns the authenticated caller.
func PrincipalFromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}

// NewContext returns ctx carrying an operator of tenant (the dev-mode
// caller, and in-process callers that act for a tenant).
func NewContext(ctx context.Context, tenant string) context.Context {
	return WithPrincipal(ctx, Principal{Tenant: tenant, Role: store.RoleOperator, KeyPrefix: DevKeyPrefix})
}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// Keys are the keys of a keys file: the sha256 of each, its tenant and
// role. The zero value has no keys.
type Keys struct {
	entries []fileKey
}

type fileKey struct {
	hash      [sha256.Size]byte
	principal Principal
}

// DevMode reports whether the file has no keys.
func (k *Keys) DevMode() bool { return k == nil || len(k.entries) == 0 }

// lookup finds the key whose sha256 is hash. It compares with every entry,
// in constant time each, so its time says nothing about which entry (or
// how much of one) matched.
func (k *Keys) lookup(hash [sha256.Size]byte) (Principal, bool) {
	var found Principal
	ok := 0
	for i := range k.entries {
		if subtle.ConstantTimeCompare(hash[:], k.entries[i].hash[:]) == 1 {
			found, ok = k.entries[i].principal, 1
		}
	}
	return found, ok == 1
}

// HashKey returns the hex sha256 of an API key, the form a keys file holds.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

var (
	tenantRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)
	hashRE   = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ValidTenant reports whether name is a tenant name: what limits may
// name. A key may carry it unless it is reserved (KeyTenantError).
func ValidTenant(name string) bool { return tenantRE.MatchString(name) }

// KeyTenantError says why a key may not carry tenant name, or returns nil.
// DevTenant (in any case) is reserved for dev mode's callers, so that no
// real tenant's data is what a dev-mode caller reaches.
func KeyTenantError(name string) error {
	if !tenantRE.MatchString(name) {
		return fmt.Errorf("tenant %q: letters, digits, '_', '.', '-', at most 63, starting with a letter or digit", name)
	}
	if strings.EqualFold(name, DevTenant) {
		return fmt.Errorf("tenant %q is reserved for dev mode (the tenant of callers without a key); give the key another tenant", name)
	}
	return nil
}

// LoadKeys reads a keys file:
//
//	keys:
//	  - tenant: acme
//	    sha256: <hex sha256 of the key>   # oncejob hash-key prints it
//	    role: submitter                   # or operator, the default
func LoadKeys(path string) (*Keys, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Keys []struct {
			Tenant string `yaml:"tenant"`
			SHA256 string `yaml:"sha256"`
			Role   string `yaml:"role"`
		} `yaml:"keys"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	k := &Keys{}
	for i, e := range doc.Keys {
		if err := KeyTenantError(e.Tenant); err != nil {
			return nil, fmt.Errorf("%s: keys[%d]: %w", path, i, err)
		}
		if !hashRE.MatchString(e.SHA256) {
			return nil, fmt.Errorf("%s: keys[%d]: sha256 must be 64 lowercase hex digits", path, i)
		}
		role := store.Role(e.Role)
		if e.Role == "" {
			role = store.RoleOperator // keys files predate roles: their keys could do everything
		}
		if !role.Valid() {
			return nil, fmt.Errorf("%s: keys[%d]: role must be submitter or operator", path, i)
		}
		var h [sha256.Size]byte
		_, _ = hex.Decode(h[:], []byte(e.SHA256))
		k.entries = append(k.entries, fileKey{hash: h, principal: Principal{Tenant: e.Tenant, Role: role, KeyPrefix: "sha256:" + e.SHA256[:8]}})
	}
	if len(k.entries) == 0 {
		return nil, fmt.Errorf("%s: no keys", path)
	}
	return k, nil
}
