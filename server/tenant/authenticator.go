package tenant

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/retry"
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
	// Mode says when callers without a key are let in (dev mode). Default
	// ModeAuto.
	Mode Mode
}

// Mode is when an Authenticator lets in callers without a key (dev mode).
// See docs/operations.md, "Authentication modes".
type Mode int

const (
	// ModeAuto is dev mode on a store that has never held a key (a row of
	// api_keys, revoked or not: revoked keys stay, for the audit trail)
	// and with no keys file; anything else, and a store that cannot be
	// read, is authenticated mode.
	ModeAuto Mode = iota
	// ModeKeys is never dev mode: a caller without a valid key is refused,
	// even when no key exists yet.
	ModeKeys
	// ModeDev is dev mode asked for explicitly: while no key of the store
	// is active (every key revoked, or none made), even on a store that
	// has held keys. A keys file or an active store key still ends it.
	ModeDev
)

// ParseMode reads a mode's name: auto, keys or dev.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "auto", "":
		return ModeAuto, nil
	case "keys":
		return ModeKeys, nil
	case "dev":
		return ModeDev, nil
	}
	return 0, fmt.Errorf("auth mode %q: auto, keys or dev", s)
}

func (m Mode) String() string {
	switch m {
	case ModeKeys:
		return "keys"
	case ModeDev:
		return "dev"
	default:
		return "auto"
	}
}

// Authenticator checks bearer keys against a keys file and the store.
//
// It fails closed. With a keys file, or in ModeKeys, it is in
// authenticated mode for good. Otherwise it is in dev mode — every caller
// is an operator of DevTenant — only while it has read the store and found
// no key (ModeAuto: no key ever; ModeDev: no active key); it reads again at
// most once per CacheTTL and leaves dev mode, for good, the first time it
// finds one, so creating the first key locks a running dev server within a
// second. Until a read has succeeded, and whenever the last one failed, a
// caller without a key is refused with UNAVAILABLE: a store that cannot be
// read never lets anyone in.
type Authenticator struct {
	cfg AuthConfig

	keysMode atomic.Bool // a key exists: dev mode is over, for good

	mu       sync.Mutex
	cache    map[string]*cachedKey // by key id
	devUntil time.Time             // dev mode known until then
	devKnown bool                  // the last look for a key succeeded and found none
	devCheck *devCheck             // the look for a key in flight, if any
	now      func() time.Time

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

// devCheckTimeout bounds a look for a first key, as lookupTimeout bounds a
// key's read: a slow store is not a store that cannot be read, and the
// look is made once a CacheTTL at most.
const devCheckTimeout = lookupTimeout

// devCheck is one look for a first key, shared by the callers that came
// while it ran and knew nothing before it.
type devCheck struct {
	done chan struct{}
	dev  bool
	err  error
}

// NewAuthenticator returns an Authenticator.
func NewAuthenticator(cfg AuthConfig) *Authenticator {
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Authenticator{cfg: cfg, cache: map[string]*cachedKey{}, now: time.Now, unknown: newUnknownKeys(cfg.CacheTTL)}
	a.keysMode.Store(!cfg.File.DevMode() || cfg.Mode == ModeKeys)
	return a
}

// CacheTTL is how long a store key's row is trusted before it is read
// again.
func (a *Authenticator) CacheTTL() time.Duration { return a.cfg.CacheTTL }

// DevMode reports whether the authenticator lets every caller in now; a
// store it cannot read is not dev mode.
func (a *Authenticator) DevMode(ctx context.Context) bool {
	dev, err := a.devMode(ctx)
	return dev && err == nil
}

// Start decides the mode a server starts in, reading the store until it
// can say: it returns whether the server is in dev mode and, while the
// store cannot be read (down, or api_keys locked), logs and tries again
// with backoff until ctx ends. A server does not serve before it knows:
// starting in dev mode because the read failed would let anyone in on a
// store that holds keys.
func (a *Authenticator) Start(ctx context.Context) (bool, error) {
	for n := 1; ; n++ {
		dev, err := a.devMode(ctx)
		if err == nil {
			return dev, nil
		}
		wait := startBackoff.Wait(n, retry.Jitter())
		a.cfg.Logger.WarnContext(ctx, "cannot read the API keys; not serving until it is known whether this store has any", "error", err, "retry_in", wait.String())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, fmt.Errorf("deciding the authentication mode: %w", context.Cause(ctx))
		case <-t.C:
		}
	}
}

// startBackoff paces Start's reads of the key store: full jitter, so the
// replicas of a fleet that lost the store together do not read in step.
var startBackoff = retry.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Multiplier: 2}

var errModeUnknown = func() error {
	st, _ := status.New(codes.Unavailable, "the key store is unavailable, so the server cannot tell whether a caller without a key may call; retry").
		WithDetails(&errdetails.ErrorInfo{Reason: "STORE_UNAVAILABLE", Domain: "oncejob.dev"})
	return st.Err()
}()

// devMode reports whether the authenticator lets every caller in: true
// only after a read of the store found no key (at most CacheTTL ago, or
// while another caller reads again). A failed read is errModeUnknown,
// never dev mode. One read is in flight at a time, bounded by
// devCheckTimeout: while it runs, the callers go on as the last read said
// or, when it failed or there was none, wait for this one's answer.
func (a *Authenticator) devMode(ctx context.Context) (bool, error) {
	if a.keysMode.Load() {
		return false, nil
	}
	if a.cfg.Store == nil {
		return true, nil
	}
	a.mu.Lock()
	if a.devKnown && (a.devCheck != nil || a.now().Before(a.devUntil)) {
		a.mu.Unlock()
		return true, nil
	}
	if c := a.devCheck; c != nil {
		a.mu.Unlock()
		select {
		case <-c.done:
			return c.dev, c.err
		case <-ctx.Done():
			return false, errModeUnknown
		}
	}
	// Unknown until the read says otherwise: a read that panics leaves
	// the mode unknown, and the next caller reads again.
	c := &devCheck{done: make(chan struct{}), err: errModeUnknown}
	a.devCheck = c
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.devCheck = nil
		if c.err != nil {
			a.devKnown = false // failed (or panicked): unknown, refused
		}
		a.mu.Unlock()
		close(c.done)
	}()
	// Not ended by the caller's leaving: others wait on this read.
	checkCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), devCheckTimeout)
	defer cancel()
	// ModeAuto ends dev mode on any key the store ever held (revoked keys
	// stay): revoking every key does not open the server again.
	keys, err := a.cfg.Store.APIKeyList(checkCtx, &store.APIKeyListParams{Limit: 1, IncludeRevoked: a.cfg.Mode != ModeDev})
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case err != nil:
		a.cfg.Logger.WarnContext(ctx, "cannot read the API keys: callers without a key are refused until it can", "error", err)
	case len(keys) > 0:
		a.keysMode.Store(true)
		c.err = nil
	default:
		a.devKnown = true
		a.devUntil = a.now().Add(a.cfg.CacheTTL)
		c.dev, c.err = true, nil
	}
	return c.dev, c.err
}

// AuthFunc returns the go-grpc-middleware auth function: it reads
// `authorization: Bearer <key>` and puts the key's Principal in the context.
func (a *Authenticator) AuthFunc() auth.AuthFunc {
	return func(ctx context.Context) (context.Context, error) {
		dev, modeErr := a.devMode(ctx)
		if dev {
			return NewContext(ctx, DevTenant), nil
		}
		key, err := auth.AuthFromMD(ctx, "bearer")
		if err == nil {
			var p Principal
			if p, err = a.Authenticate(ctx, key); err == nil {
				return WithPrincipal(ctx, p), nil
			}
		}
		if modeErr != nil && status.Code(err) == codes.Unauthenticated {
			// No valid key, and no telling whether one is needed: neither
			// let in nor told it is refused for good.
			return nil, modeErr
		}
		if status.Code(err) == codes.Unauthenticated {
			a.refused.Add(1)
		}
		return nil, err
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

	// Not ended by the caller's leaving: a read cut short is taken for a
	// store that cannot be read, which keeps the row read before for up
	// to staleFor, so a revoked key's holder who cancelled each call that
	// reads it again would keep the key past CacheTTL.
	readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
	defer cancel()
	k, err := a.cfg.Store.APIKeyGetByID(readCtx, &store.APIKeyGetByIDParams{ID: id})
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
		if err := a.cfg.Store.APIKeyTouch(readCtx, &store.APIKeyTouchParams{ID: id, Every: touchEvery}); err == nil {
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

// Precheck says, from what this process holds and without waiting on the
// store, whether a caller whose request headers are md is surely refused:
// UNAUTHENTICATED when there are keys and md has no bearer key, or a key
// no file holds, not shaped like a store key, cached as revoked or as
// another's, or remembered as unknown; nil otherwise (dev mode, a key
// known good, or one that needs a read: AuthFunc decides after). The
// server calls it when a call's headers arrive, before any byte of its
// message is read (docs/operations.md, "Request bodies").
func (a *Authenticator) Precheck(md metadata.MD) error {
	if !a.keysMode.Load() {
		return nil
	}
	vals := md.Get("authorization")
	if len(vals) == 0 {
		a.refused.Add(1)
		return errNoKey
	}
	scheme, key, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		a.refused.Add(1)
		return errNoKey
	}
	hash := sha256.Sum256([]byte(key))
	if _, ok := a.cfg.File.lookupOrNone(hash); ok {
		return nil
	}
	id, ok := parseStoreKey(key)
	if !ok || a.cfg.Store == nil {
		a.refused.Add(1)
		return errUnknownKey
	}
	now := a.now()
	a.mu.Lock()
	c := a.cache[id]
	a.mu.Unlock()
	if c != nil && now.Sub(c.readAt) < staleFor {
		k := (*cachedAPIKey)(c.key)
		want, err := hex.DecodeString(k.GetSHA256())
		if k == nil || err != nil || subtle.ConstantTimeCompare(hash[:], want) != 1 || k.RevokedAt != nil {
			a.refused.Add(1)
			return errUnknownKey
		}
		return nil
	}
	if a.unknown.missingNow(id, now) {
		a.refused.Add(1)
		return errUnknownKey
	}
	return nil
}

var errNoKey = status.Error(codes.Unauthenticated, "an API key is required: send authorization: Bearer <key>")
