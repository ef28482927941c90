package tenant

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/store"
)

// DefaultCacheTTL is how long a replica trusts what it read of a store key:
// a key revoked on any replica is refused by every replica within it.
const DefaultCacheTTL = time.Second

// touchEvery is how often a key's last use is written: rarely, so that
// authentication stays a read.
const touchEvery = time.Minute

// maxCachedKeys bounds the cache of store keys.
const maxCachedKeys = 10000

// staleFor is how long a key read before may still be used while the store
// cannot be read: the store cannot revoke it then either.
const staleFor = time.Minute

// AuthConfig configures an Authenticator. Zero fields take the defaults
// stated.
type AuthConfig struct {
	// File holds the keys of --api-keys. Default: none.
	File *Keys
	// Store holds the keys `oncejob keys create` made. Default: none.
	Store store.APIKeyStore
	// CacheTTL bounds how long a store key's row is trusted; a revocation
	// takes effect within it. Default DefaultCacheTTL.
	CacheTTL time.Duration
	// Logger receives failures to read the store. Default slog.Default().
	Logger *slog.Logger
}

// Authenticator checks bearer keys against a keys file and the store.
//
// With no file keys and no active key in the store it is in dev mode: every
// caller is an operator of DevTenant. It leaves dev mode, for good, the
// first time it sees an active key in the store (it looks at most once per
// CacheTTL), so creating the first key locks a running dev server within a
// second.
type Authenticator struct {
	cfg AuthConfig

	keysMode atomic.Bool // a key exists: dev mode is over, for good

	mu          sync.Mutex
	cache       map[string]*cachedKey // by key id
	devUntil    time.Time             // dev mode known until then
	devChecking bool                  // a caller is asking the store
	now         func() time.Time

	unknown *unknownKeys
	refused atomic.Int64
}

type cachedKey struct {
	key        *store.APIKey
	readAt     time.Time
	touchedAt  time.Time
	refreshing bool // a caller is reading it again; the others use this
}

// lookupTimeout bounds a read of the store on the authentication path,
// which runs before the server's store timeout applies.
const lookupTimeout = 2 * time.Second

// devCheckTimeout bounds the dev-mode caller's look for a first key: at
// most one caller a CacheTTL waits for it.
const devCheckTimeout = 500 * time.Millisecond

// NewAuthenticator returns an Authenticator.
func NewAuthenticator(cfg AuthConfig) *Authenticator {
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Authenticator{cfg: cfg, cache: map[string]*cachedKey{}, now: time.Now, unknown: newUnknownKeys(cfg.CacheTTL)}
	a.keysMode.Store(!cfg.File.DevMode())
	return a
}

// CacheTTL is how long a store key's row is trusted before it is read
// again.
func (a *Authenticator) CacheTTL() time.Duration { return a.cfg.CacheTTL }

// DevMode reports whether the authenticator lets every caller in. In dev
// mode one caller a CacheTTL looks for a first key in the store (bounded by
// devCheckTimeout); the others go on meanwhile. A store that cannot be
// read leaves dev mode as it is: a dev server serves loopback only, and a
// store that cannot be read answers nothing anyway.
func (a *Authenticator) DevMode(ctx context.Context) bool {
	if a.keysMode.Load() {
		return false
	}
	if a.cfg.Store == nil {
		return true
	}
	a.mu.Lock()
	if a.devChecking || a.now().Before(a.devUntil) {
		a.mu.Unlock()
		return true
	}
	a.devChecking = true
	a.mu.Unlock()
	checkCtx, cancel := context.WithTimeout(ctx, devCheckTimeout)
	keys, err := a.cfg.Store.APIKeyList(checkCtx, &store.APIKeyListParams{Limit: 1})
	cancel()
	a.mu.Lock()
	a.devChecking = false
	a.devUntil = a.now().Add(a.cfg.CacheTTL)
	a.mu.Unlock()
	if err == nil && len(keys) > 0 {
		a.keysMode.Store(true)
		return false
	}
	return true
}

// AuthFunc returns the go-grpc-middleware auth function: it reads
// `authorization: Bearer <key>` and puts the key's Principal in the context.
func (a *Authenticator) AuthFunc() auth.AuthFunc {
	return func(ctx context.Context) (context.Context, error) {
		if a.DevMode(ctx) {
			return NewContext(ctx, DevTenant), nil
		}
		key, err := auth.AuthFromMD(ctx, "bearer")
		if err != nil {
			a.refused.Add(1)
			return nil, err // already an Unauthenticated status
		}
		p, err := a.Authenticate(ctx, key)
		if err != nil {
			if status.Code(err) == codes.Unauthenticated {
				a.refused.Add(1)
			}
			return nil, err
		}
		return WithPrincipal(ctx, p), nil
	}
}

// Refused counts the callers refused with UNAUTHENTICATED: no key, or a
// key nobody knows or that was revoked.
func (a *Authenticator) Refused() int64 { return a.refused.Load() }

var errUnknownKey = status.Error(codes.Unauthenticated, "unknown or revoked API key")

// Authenticate returns the Principal of key: UNAUTHENTICATED for a key
// nobody knows or that was revoked, UNAVAILABLE when the store cannot say.
func (a *Authenticator) Authenticate(ctx context.Context, key string) (Principal, error) {
	hash := sha256.Sum256([]byte(key))
	if p, ok := a.cfg.File.lookupOrNone(hash); ok {
		return p, nil
	}
	id, ok := parseStoreKey(key)
	if !ok || a.cfg.Store == nil {
		return Principal{}, errUnknownKey
	}
	k, err := a.storeKey(ctx, id)
	if err != nil {
		return Principal{}, err
	}
	want, err := hex.DecodeString(k.GetSHA256())
	if k == nil || err != nil || subtle.ConstantTimeCompare(hash[:], want) != 1 || k.RevokedAt != nil {
		return Principal{}, errUnknownKey
	}
	return Principal{Tenant: k.Tenant, Role: k.Role, KeyPrefix: StoreKeyPrefix(k.ID)}, nil
}

// storeKey returns the row of key id (nil when there is none), from the
// cache while it is fresh. One caller at a time reads a key again; the
// others use what was read before, for at most staleFor.
func (a *Authenticator) storeKey(ctx context.Context, id string) (*cachedAPIKey, error) {
	now := a.now()
	a.mu.Lock()
	c := a.cache[id]
	switch {
	case c != nil && now.Sub(c.readAt) < a.cfg.CacheTTL:
		a.mu.Unlock()
		return (*cachedAPIKey)(c.key), nil
	case c != nil && c.refreshing && now.Sub(c.readAt) < staleFor:
		a.mu.Unlock()
		return (*cachedAPIKey)(c.key), nil
	case c != nil:
		c.refreshing = true
	}
	a.mu.Unlock()
	if c == nil && a.unknown.knownMissing(ctx, a.cfg.Store, id, now) {
		a.unknown.missed(id, now) // keeps a flood known as one
		return nil, nil
	}

	readCtx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	k, err := a.cfg.Store.APIKeyGetByID(readCtx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		a.mu.Lock()
		if c != nil {
			c.refreshing = false
		}
		a.mu.Unlock()
		if c != nil && now.Sub(c.readAt) < staleFor {
			return (*cachedAPIKey)(c.key), nil
		}
		a.cfg.Logger.WarnContext(ctx, "API key lookup failed", "error", err)
		st, _ := status.New(codes.Unavailable, "the key store is unavailable; retry").
			WithDetails(&errdetails.ErrorInfo{Reason: "STORE_UNAVAILABLE", Domain: "oncejob.dev"})
		return nil, st.Err()
	}
	if err != nil {
		// No such key: remembered apart from the keys, so made-up ids
		// cannot push real keys out of the cache.
		a.unknown.missed(id, now)
		a.mu.Lock()
		delete(a.cache, id)
		a.mu.Unlock()
		return nil, nil
	}
	fresh := &cachedKey{key: k, readAt: now}
	if c != nil {
		fresh.touchedAt = c.touchedAt
	}
	if k != nil && k.RevokedAt == nil && now.Sub(fresh.touchedAt) >= touchEvery {
		// One write a minute per key and replica, and the store skips it
		// when another replica wrote within the minute.
		if err := a.cfg.Store.APIKeyTouch(readCtx, id, touchEvery); err == nil {
			fresh.touchedAt = now
		}
	}
	a.mu.Lock()
	if len(a.cache) >= maxCachedKeys {
		clear(a.cache) // only ids the store has are cached, but bound it anyway
	}
	a.cache[id] = fresh
	a.mu.Unlock()
	return (*cachedAPIKey)(k), nil
}

// cachedAPIKey is a store.APIKey whose accessors accept nil.
type cachedAPIKey store.APIKey

func (k *cachedAPIKey) GetSHA256() string {
	if k == nil {
		return ""
	}
	return k.SHA256
}

func (k *Keys) lookupOrNone(hash [sha256.Size]byte) (Principal, bool) {
	if k == nil {
		return Principal{}, false
	}
	return k.lookup(hash)
}

// AuthFunc authenticates against the file's keys alone.
func (k *Keys) AuthFunc() auth.AuthFunc {
	return NewAuthenticator(AuthConfig{File: k}).AuthFunc()
}
