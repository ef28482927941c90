package tenant

import (
	"context"
	"sync"
	"time"

	"github.com/oncejob/oncejob/store"
)

// Made-up keys shaped like store keys must not each cost a store read: a
// caller can make a new id per call, so remembering ids alone cannot stop
// a flood. unknownKeys remembers the ids the store did not have (bounded,
// for one CacheTTL), and once more than floodMisses of them come within a
// CacheTTL, it lists the store's active key ids (one read a CacheTTL at
// most) and refuses any id not among them without asking the store, until
// a CacheTTL passes with fewer misses (a refusal counts as one). A key
// created during such a flood may so be refused for up to a CacheTTL.
// With listLimit active keys or more the list cannot be complete, and ids
// are read one by one as before.
type unknownKeys struct {
	ttl time.Duration

	mu          sync.Mutex
	missing     map[string]time.Time // id → when the store did not have it
	windowStart time.Time
	misses      int
	floodUntil  time.Time       // a flood was seen: it is one until then
	active      map[string]bool // the active ids listed; nil: none listed
	listedAt    time.Time
	listing     bool
}

const (
	// maxUnknownKeys bounds the ids remembered as missing.
	maxUnknownKeys = 4096
	// floodMisses is how many ids the store did not have, within a
	// CacheTTL, make a flood.
	floodMisses = 16
	// listLimit is the most keys one list returns (store.APIKeyListParams).
	listLimit = 1000
)

func newUnknownKeys(ttl time.Duration) *unknownKeys {
	return &unknownKeys{ttl: ttl, missing: map[string]time.Time{}}
}

// knownMissing reports whether id is known not to be an active key, without a
// read of the store by id: it was missing within a CacheTTL, or, during a
// flood, the listed active ids do not hold it. It may list the active ids
// (one caller at a time; the others use the list before, or read by id).
func (u *unknownKeys) knownMissing(ctx context.Context, st store.APIKeyStore, id string, now time.Time) bool {
	u.mu.Lock()
	if at, ok := u.missing[id]; ok && now.Sub(at) < u.ttl {
		u.mu.Unlock()
		return true
	}
	if !now.Before(u.floodUntil) {
		u.mu.Unlock()
		return false
	}
	if u.active != nil && (now.Sub(u.listedAt) < u.ttl || u.listing) {
		missing := !u.active[id]
		u.mu.Unlock()
		return missing
	}
	if u.listing {
		u.mu.Unlock()
		return false
	}
	u.listing = true
	u.mu.Unlock()

	listCtx, cancel := context.WithTimeout(ctx, lookupTimeout)
	keys, err := st.APIKeyList(listCtx, &store.APIKeyListParams{Limit: listLimit})
	cancel()
	var active map[string]bool
	if err == nil && len(keys) < listLimit {
		active = make(map[string]bool, len(keys))
		for _, k := range keys {
			active[k.ID] = true
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.listing = false
	u.active, u.listedAt = active, now
	return active != nil && !active[id]
}

// missingNow is knownMissing from memory alone: it never reads the store.
func (u *unknownKeys) missingNow(id string, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if at, ok := u.missing[id]; ok && now.Sub(at) < u.ttl {
		return true
	}
	return now.Before(u.floodUntil) && u.active != nil && now.Sub(u.listedAt) < u.ttl && !u.active[id]
}

// missed records that the store did not have id.
func (u *unknownKeys) missed(id string, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if now.Sub(u.windowStart) >= u.ttl {
		u.windowStart, u.misses = now, 0
	}
	u.misses++
	if u.misses >= floodMisses {
		u.floodUntil = now.Add(u.ttl)
	}
	if len(u.missing) >= maxUnknownKeys {
		clear(u.missing) // made-up ids must not grow it without bound
	}
	u.missing[id] = now
}
