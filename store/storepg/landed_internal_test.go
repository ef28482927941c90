package storepg

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
)

// landedJSON writes what json.Marshal of the store.LandedAttempt wrote before
// it, byte for byte: names and references that need escapes, times with and
// without fractions, in other zones, out of JSON's range.
func TestLandedJSONIsTheLandedAttempt(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 6, 6, 18, 53, 442112411, time.UTC)
	zone := time.FixedZone("x", -7*3600-30*60)
	cases := []struct {
		owner string
		res   store.DeliveryResult
	}{
		{"relay-vm-10951-087bb3f7", store.DeliveryResult{ExternalRef: "BENCH:1", StartedAt: at, FinishedAt: at.Add(1456012 * time.Nanosecond)}},
		{"relay-\"q\"\\<&>\x01", store.DeliveryResult{ExternalRef: "receipt é\u2028\x7f", HTTPStatus: 204, Duplicate: true, StartedAt: at.Truncate(time.Second), FinishedAt: at.In(zone)}},
		{"a&b", store.DeliveryResult{ExternalRef: "x>y", StartedAt: at, FinishedAt: at}},
		{"a\tb", store.DeliveryResult{ExternalRef: "x\u2029", StartedAt: at, FinishedAt: at}},
		{"r", store.DeliveryResult{HTTPStatus: -1, StartedAt: time.Time{}, FinishedAt: at.Truncate(time.Millisecond).In(time.Local)}},
		{"r", store.DeliveryResult{StartedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), FinishedAt: at}},
		{"r", store.DeliveryResult{StartedAt: at, FinishedAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}},
		// Zone offsets of a day or more: MarshalJSON refuses them.
		{"r", store.DeliveryResult{StartedAt: at.In(time.FixedZone("", 24*3600)), FinishedAt: at}},
		{"r", store.DeliveryResult{StartedAt: at, FinishedAt: at.In(time.FixedZone("", -24*3600-1))}},
		{"r", store.DeliveryResult{StartedAt: at.In(time.FixedZone("", 24*3600-1)), FinishedAt: at.In(time.FixedZone("", -24*3600+60))}},
	}
	// And seeded random ones: strings of any bytes, times of any year and
	// offset around the edges.
	rng := rand.New(rand.NewPCG(33, 6))
	pick := func(parts ...string) string {
		var b []byte
		for range rng.IntN(6) {
			b = append(b, parts[rng.IntN(len(parts))]...)
		}
		return string(b)
	}
	anyTime := func() time.Time {
		year := []int{-1, 0, 1, 2026, 9999, 10000}[rng.IntN(6)]
		offset := []int{0, 3600, -3600, 24*3600 - 1, 24 * 3600, -24 * 3600, 26*3600 + 33*60, 5*3600 + 30*60 + 7}[rng.IntN(8)]
		return time.Date(year, time.Month(1+rng.IntN(12)), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1e9), time.UTC).
			In(time.FixedZone("", offset))
	}
	for range 5000 {
		parts := []string{"a", "é", "\u2028", "\u2029", "<", ">", "&", "\"", "\\", "\x00", "\x1f", "\x7f", "\xff", "\xe2\x80", "\t", "日"}
		cases = append(cases, struct {
			owner string
			res   store.DeliveryResult
		}{pick(parts...), store.DeliveryResult{ExternalRef: pick(parts...), HTTPStatus: rng.Int32N(600) - 1, Duplicate: rng.IntN(2) == 0, StartedAt: anyTime(), FinishedAt: anyTime()}})
	}
	for _, c := range cases {
		want, err := json.Marshal(store.LandedAttempt{
			Relay: c.owner, ExternalRef: c.res.ExternalRef, HTTPStatus: c.res.HTTPStatus, Duplicate: c.res.Duplicate,
			StartedAt: c.res.StartedAt, FinishedAt: c.res.FinishedAt,
		})
		if err != nil {
			want = nil // the row was written without a landed attempt
		}
		require.Equal(t, string(want), landedJSON(jsonString(nil, c.owner), &c.res))
	}
}
