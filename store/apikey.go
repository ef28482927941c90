package store

import (
	"context"
	"time"
)

// Role is what an API key may do. See docs/operations.md, "API keys and
// limits".
type Role string

const (
	// RoleSubmitter submits, reads, lists and watches its tenant's work.
	RoleSubmitter Role = "submitter"
	// RoleOperator may also act on jobs, runs, schedules and deliveries:
	// cancel, replay, resolve, approve, retry.
	RoleOperator Role = "operator"
)

// Valid reports whether r is a role the store keeps.
func (r Role) Valid() bool { return r == RoleSubmitter || r == RoleOperator }

// APIKeyStore keeps API keys: only the sha256 of each secret, its tenant and
// role, and when it was created, last used and revoked. The server reads a
// key by its id (the part of the key before the secret) and compares hashes
// itself, in constant time.
type APIKeyStore interface {
	// APIKeyCreate inserts a key. An id already taken is an error (ids are
	// random; the caller makes a new one).
	APIKeyCreate(ctx context.Context, params *APIKeyCreateParams) (*APIKey, error)
	// APIKeyGetByID returns a key, revoked or not, or ErrNotFound.
	APIKeyGetByID(ctx context.Context, params *APIKeyGetByIDParams) (*APIKey, error)
	// APIKeyList returns keys newest first.
	APIKeyList(ctx context.Context, params *APIKeyListParams) ([]*APIKey, error)
	// APIKeyRevoke revokes a key and returns it; revoking a revoked key
	// keeps its first RevokedAt. An unknown id is ErrNotFound.
	APIKeyRevoke(ctx context.Context, params *APIKeyRevokeParams) (*APIKey, error)
	// APIKeyTouch sets LastUsedAt to now unless it is more recent than
	// params.Every ago, so that authenticating a busy key writes rarely.
	APIKeyTouch(ctx context.Context, params *APIKeyTouchParams) error
}

// APIKey is a stored key, without its secret.
type APIKey struct {
	ID         string
	Tenant     string
	Role       Role
	Name       string
	SHA256     string // hex of sha256(the whole key)
	CreatedAt  time.Time
	RevokedAt  *time.Time
	LastUsedAt *time.Time
}

type APIKeyCreateParams struct {
	ID     string
	Tenant string
	Role   Role
	Name   string
	SHA256 string
}

type APIKeyGetByIDParams struct {
	ID string
}

type APIKeyRevokeParams struct {
	ID string
}

type APIKeyTouchParams struct {
	ID    string
	Every time.Duration
}

type APIKeyListParams struct {
	Tenant         string // empty: every tenant
	IncludeRevoked bool
	Limit          int // 0 means 1000
}

// PageLimit is Limit with its default.
func (p *APIKeyListParams) PageLimit() int { return pageLimit(p.Limit, 1000) }

// Actor is who asked for an operator transition: recorded on the event it
// appends, in its transaction (the audit trail).
type Actor struct {
	KeyPrefix string // the key's display prefix, never the secret
	Role      Role
	RPC       string // the full gRPC method
}

// UsageStore reports what per-tenant limits are checked against.
type UsageStore interface {
	// TenantUsage counts the tenant's jobs not yet finished and sums the
	// document bytes of the jobs it created since params.Since.
	TenantUsage(ctx context.Context, params *TenantUsageParams) (*TenantUsage, error)
}

type TenantUsageParams struct {
	Tenant string
	Since  time.Time
}

type TenantUsage struct {
	InFlight      int64
	DocumentBytes int64
}

// ActorFrom is the Actor of an event's stored columns; nil when they are
// empty (no operator made the event).
func ActorFrom(keyPrefix, role, rpc string) *Actor {
	if keyPrefix == "" && role == "" && rpc == "" {
		return nil
	}
	return &Actor{KeyPrefix: keyPrefix, Role: Role(role), RPC: rpc}
}

// KeyPrefixOrEmpty, RoleOrEmpty and RPCOrEmpty read a possibly nil Actor as
// the columns store it: empty for no actor.
func (a *Actor) KeyPrefixOrEmpty() string {
	if a == nil {
		return ""
	}
	return a.KeyPrefix
}

func (a *Actor) RoleOrEmpty() string {
	if a == nil {
		return ""
	}
	return string(a.Role)
}

func (a *Actor) RPCOrEmpty() string {
	if a == nil {
		return ""
	}
	return a.RPC
}
