package tenant_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
)

// keyStore is an in-memory store.APIKeyStore.
type keyStore struct {
	mu    sync.Mutex
	keys  map[string]*store.APIKey
	err   error
	reads int // by id
	lists int
	// listed, when set, receives the count of lists at each list.
	listed chan int
	// honorCtx makes reads fail with the context's error once it has
	// ended, as a real store's do.
	honorCtx bool
	// block, when set, holds every list until it is closed: a slow store;
	// entered, when set, is told of each list before it blocks.
	block   chan struct{}
	entered chan struct{}
	// panicOnce makes the next list panic.
	panicOnce bool
}

func (s *keyStore) APIKeyCreate(_ context.Context, p *store.APIKeyCreateParams) (*store.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := &store.APIKey{ID: p.ID, Tenant: p.Tenant, Role: p.Role, SHA256: p.SHA256, CreatedAt: time.Now()}
	s.keys[p.ID] = k
	return k, nil
}

func (s *keyStore) APIKeyGetByID(ctx context.Context, p *store.APIKeyGetByIDParams) (*store.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.honorCtx && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if s.err != nil {
		return nil, s.err
	}
	k, ok := s.keys[p.ID]
	if !ok {
		return nil, store.ErrNotFound
	}
	c := *k
	return &c, nil
}

func (s *keyStore) APIKeyList(ctx context.Context, p *store.APIKeyListParams) ([]*store.APIKey, error) {
	s.mu.Lock()
	block, entered, panicking := s.block, s.entered, s.panicOnce
	s.panicOnce = false
	s.mu.Unlock()
	if panicking {
		panic("the key store's driver panicked")
	}
	if entered != nil {
		entered <- struct{}{}
	}
	if block != nil {
		<-block
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	if s.listed != nil {
		s.listed <- s.lists
	}
	if s.honorCtx && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if s.err != nil {
		return nil, s.err
	}
	var out []*store.APIKey
	for _, k := range s.keys {
		if k.RevokedAt == nil || p.IncludeRevoked {
			out = append(out, k)
		}
	}
	return out, nil
}

func (s *keyStore) APIKeyRevoke(_ context.Context, p *store.APIKeyRevokeParams) (*store.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.keys[p.ID].RevokedAt = &now
	return s.keys[p.ID], nil
}

func (s *keyStore) APIKeyTouch(context.Context, *store.APIKeyTouchParams) error { return nil }

// fakeClock gives a a clock that stands still until the test advances it,
// so what a TTL allows is shown without waiting for one.
func fakeClock(a *tenant.Authenticator) (advance func(time.Duration)) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	tenant.SetNow(a, func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	})
	return func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
}

func principalOf(a *tenant.Authenticator, key string) (tenant.Principal, error) {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+key))
	ctx, err := a.AuthFunc()(ctx)
	if err != nil {
		return tenant.Principal{}, err
	}
	p, _ := tenant.PrincipalFromContext(ctx)
	return p, nil
}

func create(t *testing.T, s *keyStore, tenantName string, role store.Role) (key, id string) {
	t.Helper()
	key, id, prefix := tenant.NewStoreKey()
	require.Equal(t, "ojk_"+id, prefix)
	_, err := s.APIKeyCreate(context.Background(), &store.APIKeyCreateParams{ID: id, Tenant: tenantName, Role: role, SHA256: tenant.HashKey(key)})
	require.NoError(t, err)
	return key, id
}

func TestAuthenticator(t *testing.T) {
	t.Parallel()

	t.Run("StoreKeysAddToTheFile", func(t *testing.T) {
		t.Parallel()
		s := &keyStore{keys: map[string]*store.APIKey{}}
		file, err := tenant.LoadKeys(writeKeys(t, fmt.Sprintf("keys:\n  - tenant: globex\n    sha256: %s\n    role: submitter\n", tenant.HashKey("globex-file-key"))))
		require.NoError(t, err)
		a := tenant.NewAuthenticator(tenant.AuthConfig{File: file, Store: s, CacheTTL: time.Hour})
		key, id := create(t, s, "acme", store.RoleOperator)

		p, err := principalOf(a, key)
		require.NoError(t, err)
		require.Equal(t, tenant.Principal{Tenant: "acme", Role: store.RoleOperator, KeyPrefix: "ojk_" + id}, p)
		p, err = principalOf(a, "globex-file-key")
		require.NoError(t, err)
		require.Equal(t, tenant.Principal{Tenant: "globex", Role: store.RoleSubmitter, KeyPrefix: "sha256:" + tenant.HashKey("globex-file-key")[:8]}, p)

		for _, bad := range []string{key[:len(key)-1] + "x", "ojk_" + id + "_", "ojk_aaaaaaaaaaaa_secret", tenant.HashKey(key)} {
			_, err := principalOf(a, bad)
			require.Equal(t, codes.Unauthenticated, status.Code(err), bad)
		}
	})

	t.Run("RevocationTakesEffectWithinTheTTL", func(t *testing.T) {
		t.Parallel()
		s := &keyStore{keys: map[string]*store.APIKey{}}
		const ttl = 50 * time.Millisecond
		a := tenant.NewAuthenticator(tenant.AuthConfig{Store: s, CacheTTL: ttl})
		advance := fakeClock(a)
		key, id := create(t, s, "acme", store.RoleSubmitter)
		_, err := principalOf(a, key)
		require.NoError(t, err)
		_, err = s.APIKeyRevoke(context.Background(), &store.APIKeyRevokeParams{ID: id})
		require.NoError(t, err)
		_, err = principalOf(a, key)
		require.NoError(t, err, "within the TTL the key read before is trusted")
		advance(ttl)
		_, err = principalOf(a, key)
		require.Equal(t, codes.Unauthenticated, status.Code(err), "a TTL after the revocation: %v", err)
	})

	// A caller that leaves while its read of a key is under way (a
	// cancelled call, a closed connection) does not make the read fail:
	// before, the read ended with the caller's context, the row read
	// before was kept as if the store were down, and the others were let
	// in with it while a read was under way, so a revoked key's holder who
	// cancelled each call that read it again kept the key for staleFor (a
	// minute) instead of a CacheTTL.
	t.Run("ACallerThatLeavesDoesNotKeepARevokedKey", func(t *testing.T) {
		t.Parallel()
		s := &keyStore{keys: map[string]*store.APIKey{}, honorCtx: true}
		const ttl = 50 * time.Millisecond
		a := tenant.NewAuthenticator(tenant.AuthConfig{Store: s, CacheTTL: ttl})
		advance := fakeClock(a)
		key, id := create(t, s, "acme", store.RoleSubmitter)
		_, err := principalOf(a, key)
		require.NoError(t, err)
		_, err = s.APIKeyRevoke(context.Background(), &store.APIKeyRevokeParams{ID: id})
		require.NoError(t, err)
		advance(ttl)

		left, cancel := context.WithCancel(metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+key)))
		cancel()
		_, err = a.AuthFunc()(left)
		require.Equal(t, codes.Unauthenticated, status.Code(err), "the store was read, and says revoked: %v", err)
		md := metadata.Pairs("authorization", "Bearer "+key)
		require.Equal(t, codes.Unauthenticated, status.Code(a.Precheck(md)), "the revocation read is cached: refused from memory")
	})

	t.Run("AnUnreadableStoreIsUnavailableUnlessTheKeyWasReadLately", func(t *testing.T) {
		t.Parallel()
		s := &keyStore{keys: map[string]*store.APIKey{}}
		a := tenant.NewAuthenticator(tenant.AuthConfig{Store: s, CacheTTL: time.Millisecond})
		advance := fakeClock(a)
		known, _ := create(t, s, "acme", store.RoleSubmitter)
		other, _ := create(t, s, "acme", store.RoleSubmitter)
		_, err := principalOf(a, known)
		require.NoError(t, err)
		s.mu.Lock()
		s.err = errors.New("connection refused")
		s.mu.Unlock()
		advance(time.Millisecond) // known's read is past its TTL
		_, err = principalOf(a, other)
		require.Equal(t, codes.Unavailable, status.Code(err), "a key never read, on a store that cannot be read: %v", err)
		_, err = principalOf(a, known)
		require.NoError(t, err, "a key read within the minute is still known: the store cannot revoke it now either")
	})

	t.Run("DevModeEndsWhenTheFirstKeyIsCreated", func(t *testing.T) {
		t.Parallel()
		s := &keyStore{keys: map[string]*store.APIKey{}}
		const ttl = 20 * time.Millisecond
		a := tenant.NewAuthenticator(tenant.AuthConfig{Store: s, CacheTTL: ttl})
		advance := fakeClock(a)
		require.True(t, a.DevMode(context.Background()))
		p, err := principalOf(a, "anything")
		require.NoError(t, err)
		require.Equal(t, tenant.DevTenant, p.Tenant)

		key, _ := create(t, s, "acme", store.RoleSubmitter)
		require.True(t, a.DevMode(context.Background()), "the store is looked at once a TTL")
		advance(ttl)
		require.False(t, a.DevMode(context.Background()), "a TTL after the first key")
		_, err = principalOf(a, "anything")
		require.Equal(t, codes.Unauthenticated, status.Code(err))
		p, err = principalOf(a, key)
		require.NoError(t, err)
		require.Equal(t, "acme", p.Tenant)
	})

	// Finding 1 of issue #31: a store that cannot be read, or that has
	// held keys, is never dev mode.
	t.Run("AnUnreadableStoreIsNotDevMode", func(t *testing.T) {
		t.Parallel()
		s := &keyStore{keys: map[string]*store.APIKey{}, err: errors.New("lock timeout")}
		a := tenant.NewAuthenticator(tenant.AuthConfig{Store: s, CacheTTL: time.Millisecond})
		for range 3 {
			require.False(t, a.DevMode(context.Background()))
			_, err := principalOf(a, "anything")
			require.Equal(t, codes.Unavailable, status.Code(err), "no key and no telling whether one is needed")
			ctx, err := a.AuthFunc()(context.Background())
			require.Nil(t, ctx)
			require.Equal(t, codes.Unavailable, status.Code(err))
		}
		s.mu.Lock()
		s.err = nil
		s.mu.Unlock()
		require.True(t, a.DevMode(context.Background()), "read at last: no key ever, dev mode")
		p, err := principalOf(a, "anything")
		require.NoError(t, err)
		require.Equal(t, tenant.DevTenant, p.Tenant)
	})

	// A slow read of the key store is not a store that cannot be read:
	// the callers that come while the one read runs wait for its answer
	// instead of being refused, and a read slower than half a second (the
	// bound this read had) still answers.
	t.Run("CallersWaitForTheReadInFlight", func(t *testing.T) {
		t.Parallel()
		s := &keyStore{keys: map[string]*store.APIKey{}, block: make(chan struct{}), honorCtx: true}
		a := tenant.NewAuthenticator(tenant.AuthConfig{Store: s, CacheTTL: time.Hour})
		const callers = 8
		errs := make(chan error, callers)
		for range callers {
			go func() {
				p, err := principalOf(a, "anything")
				if err == nil && p.Tenant != tenant.DevTenant {
					err = fmt.Errorf("tenant %q", p.Tenant)
				}
				errs <- err
			}()
		}
		time.Sleep(700 * time.Millisecond) // longer than the bound this read had
		close(s.block)
		for range callers {
			require.NoError(t, <-errs)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		require.Equal(t, 1, s.lists, "one read for every caller")
	})

	t.Run("CallersWaitingOnAFailedReadAreRefused", func(t *testing.T) {
		t.Parallel()
		s := &keyStore{keys: map[string]*store.APIKey{}, block: make(chan struct{}), err: errors.New("lock timeout")}
		a := tenant.NewAuthenticator(tenant.AuthConfig{Store: s, CacheTTL: time.Hour})
		errs := make(chan error, 4)
		for range 4 {
			go func() { _, err := principalOf(a, "anything"); errs <- err }()
		}
		close(s.block)
		for range 4 {
			require.Equal(t, codes.Unavailable, status.Code(<-errs))
		}
		s.mu.Lock()
		s.err = nil
		s.mu.Unlock()
		require.True(t, a.DevMode(context.Background()), "read at last")
	})

	t.Run("AWaiterWhoLeavesIsRefusedNotLetIn", func(t *testing.T) {
		t.Parallel()
		s := &keyStore{keys: map[string]*store.APIKey{}, block: make(chan struct{}), entered: make(chan struct{}, 1)}
		a := tenant.NewAuthenticator(tenant.AuthConfig{Store: s, CacheTTL: time.Hour})
		first := make(chan error, 1)
		go func() { _, err := principalOf(a, "first"); first <- err }()
		<-s.entered // the read is in flight
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := a.AuthFunc()(ctx)
		require.Equal(t, codes.Unavailable, status.Code(err), "left while the read ran: %v", err)
		close(s.block)
		require.NoError(t, <-first, "the read went on without the caller who left")
	})

	t.Run("AReadThatPanicsLeavesTheModeUnknown", func(t *testing.T) {
		t.Parallel()
		s := &keyStore{keys: map[string]*store.APIKey{}}
		a := tenant.NewAuthenticator(tenant.AuthConfig{Store: s, CacheTTL: time.Second})
		advance := fakeClock(a)
		require.True(t, a.DevMode(context.Background()), "no key yet")
		create(t, s, "acme", store.RoleOperator)
		s.mu.Lock()
		s.panicOnce = true
		s.mu.Unlock()
		advance(time.Second)
		require.Panics(t, func() { a.DevMode(context.Background()) })
		require.False(t, a.DevMode(context.Background()), "read again after the panic: the key ends dev mode")
	})

	t.Run("AnUnreadableStoreStillAuthenticatesKeys", func(t *testing.T) {
		t.Parallel()
		s := &keyStore{keys: map[string]*store.APIKey{}}
		a := tenant.NewAuthenticator(tenant.AuthConfig{Store: s, CacheTTL: time.Hour})
		key, _ := create(t, s, "acme", store.RoleSubmitter)
		_, err := principalOf(a, key) // read into the cache
		require.NoError(t, err)
		s.mu.Lock()
		s.err = errors.New("lock timeout")
		s.mu.Unlock()
		p, err := principalOf(a, key)
		require.NoError(t, err)
		require.Equal(t, "acme", p.Tenant)
	})

	t.Run("StartWaitsUntilTheStoreCanBeRead", func(t *testing.T) {
		t.Parallel()
		s := &keyStore{keys: map[string]*store.APIKey{}, err: errors.New("lock timeout"), listed: make(chan int, 1000)}
		a := tenant.NewAuthenticator(tenant.AuthConfig{Store: s, CacheTTL: time.Hour})
		create(t, s, "acme", store.RoleOperator)
		type result struct {
			dev bool
			err error
		}
		done := make(chan result, 1)
		go func() { dev, err := a.Start(context.Background()); done <- result{dev, err} }()
		for n := 0; n < 2; { // it tries again
			select {
			case n = <-s.listed:
			case <-time.After(10 * time.Second):
				t.Fatal("Start did not read the store again")
			}
		}
		select {
		case r := <-done:
			t.Fatalf("Start returned while the store could not be read: %+v", r)
		default:
		}
		s.mu.Lock()
		s.err = nil
		s.mu.Unlock()
		r := <-done
		require.NoError(t, r.err)
		require.False(t, r.dev, "the store holds a key")

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := tenant.NewAuthenticator(tenant.AuthConfig{Store: &keyStore{err: errors.New("down")}}).Start(ctx)
		require.Error(t, err, "Start gives up when its context ends")
	})

	t.Run("RevokingEveryKeyIsNotDevMode", func(t *testing.T) {
		t.Parallel()
		s := &keyStore{keys: map[string]*store.APIKey{}}
		_, id := create(t, s, "acme", store.RoleOperator)
		_, err := s.APIKeyRevoke(context.Background(), &store.APIKeyRevokeParams{ID: id})
		require.NoError(t, err)
		a := tenant.NewAuthenticator(tenant.AuthConfig{Store: s, CacheTTL: time.Millisecond})
		require.False(t, a.DevMode(context.Background()), "the store has held a key")
		_, err = principalOf(a, "anything")
		require.Equal(t, codes.Unauthenticated, status.Code(err))

		dev := tenant.NewAuthenticator(tenant.AuthConfig{Store: s, CacheTTL: time.Millisecond, Mode: tenant.ModeDev})
		advance := fakeClock(dev)
		require.True(t, dev.DevMode(context.Background()), "asked for: dev mode while no key is active")
		key, _ := create(t, s, "acme", store.RoleOperator)
		advance(time.Millisecond)
		require.False(t, dev.DevMode(context.Background()), "an active key still ends it, a TTL later")
		p, err := principalOf(dev, key)
		require.NoError(t, err)
		require.Equal(t, "acme", p.Tenant)
	})

	t.Run("ModeKeysIsNeverDevMode", func(t *testing.T) {
		t.Parallel()
		a := tenant.NewAuthenticator(tenant.AuthConfig{Store: &keyStore{keys: map[string]*store.APIKey{}}, Mode: tenant.ModeKeys})
		dev, err := a.Start(context.Background())
		require.NoError(t, err)
		require.False(t, dev)
		_, err = principalOf(a, "anything")
		require.Equal(t, codes.Unauthenticated, status.Code(err))
	})

	t.Run("ParseKeyID", func(t *testing.T) {
		t.Parallel()
		key, id, prefix := tenant.NewStoreKey()
		for _, s := range []string{key, prefix, id} {
			got, ok := tenant.ParseKeyID(s)
			require.True(t, ok, s)
			require.Equal(t, id, got)
		}
		for _, s := range []string{"", "ojk_", "ojk_short", "ojk_ABCDEFGHIJKL", "ojk_aaaaaaaaaaaa1"} {
			_, ok := tenant.ParseKeyID(s)
			require.False(t, ok, s)
		}
	})
}
