package storepg

import (
	"encoding/json"
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
