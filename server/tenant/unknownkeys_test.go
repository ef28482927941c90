package tenant_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
)

// madeUpKey is a key shaped like a store key, with a random id.
func madeUpKey(rng *rand.Rand) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	b := []byte("ojk_............_secret")
	for i := 4; i < 16; i++ {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// A flood of made-up keys shaped like store keys — a new id each call —
// costs the store a bounded number of reads, not one a call: 0, 1 and a
// few made-up keys are read by id; past a flood's threshold the active ids
// are listed once a key-cache TTL and the rest are refused from that list.
// Every one is UNAUTHENTICATED and counted; the real key is accepted
// throughout; a key created during the flood is accepted within a TTL.
func TestUnknownKeysDoNotReachTheStore(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	const ttl = time.Second
	s := &keyStore{keys: map[string]*store.APIKey{}}
	a := tenant.NewAuthenticator(tenant.AuthConfig{Store: s, CacheTTL: ttl})
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	tenant.SetNow(a, func() time.Time { return now })
	real, _ := create(t, s, "acme", store.RoleSubmitter)
	storeReads := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.reads + s.lists
	}
	refuse := func(n int) {
		t.Helper()
		for range n {
			_, err := principalOf(a, madeUpKey(rng))
			require.Equal(t, codes.Unauthenticated, status.Code(err), "seed %d", seed)
			now = now.Add(time.Millisecond)
		}
	}

	// A few unknown ids are each read (no flood yet), and one asked again
	// within the TTL is not.
	_, err := principalOf(a, real) // dev mode over, the key cached
	require.NoError(t, err)
	base := storeReads()
	refuse(1)
	require.Equal(t, base+1, storeReads())
	again := madeUpKey(rng)
	for range 3 {
		_, err := principalOf(a, again)
		require.Equal(t, codes.Unauthenticated, status.Code(err))
	}
	require.Equal(t, base+2, storeReads(), "an unknown id is remembered for the TTL")

	// The flood: 5,000 calls over 5 TTLs, the real key beside them.
	before := storeReads()
	var created string
	for i := range 50 {
		refuse(100)
		_, err := principalOf(a, real)
		require.NoError(t, err, "the real key is accepted during the flood")
		if i == 20 {
			created, _ = create(t, s, "acme", store.RoleOperator)
		}
		if i == 20+int(ttl/(100*time.Millisecond))+1 {
			_, err := principalOf(a, created)
			require.NoError(t, err, "a key created during the flood is accepted within a TTL")
		}
	}
	reads := storeReads() - before
	t.Logf("5,000 made-up keys over %s: %d store reads", 5*ttl, reads)
	require.LessOrEqual(t, reads, 40, "a flood costs a bounded number of reads, not one a call")
	require.EqualValues(t, 5004, a.Refused(), "every refusal counted")

}
