package server

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server/pagetoken"
	"github.com/oncejob/oncejob/store"
)

// TestDeliveryTokenHoldsItsFilters: a ListDeliveries token reads back only
// under the filters of the list that issued it (every filter changed
// alone, and all of them dropped, is refused); a token of the old "d1"
// form, which held no filters, only by a list without filters.
func TestDeliveryTokenHoldsItsFilters(t *testing.T) {
	sig, err := pagetoken.New(pagetoken.NewSecret())
	require.NoError(t, err)
	job := "0193e1b6-5a1c-7000-8000-000000000001"
	filters := []*oncejobv1.ListDeliveriesRequest{
		{},
		{Status: oncejobv1.DeliveryStatus_DELIVERY_STATUS_DEAD_LETTERED},
		{JobId: job},
		{Sink: "hook"},
		{Status: oncejobv1.DeliveryStatus_DELIVERY_STATUS_PENDING, JobId: job, Sink: "nats-results"},
	}
	cursor := &store.DeliveryCursor{Rank: 1, ID: 42}
	for i, issued := range filters {
		token := encodeDeliveryToken(sig, "acme", cursor, issued)
		for j, used := range filters {
			req := &oncejobv1.ListDeliveriesRequest{Status: used.Status, JobId: used.JobId, Sink: used.Sink, PageToken: token}
			got, err := decodeDeliveryToken(sig, "acme", req)
			if i == j {
				require.NoError(t, err, "filters %d", i)
				require.Equal(t, cursor, got)
				continue
			}
			require.ErrorIs(t, err, errDeliveryTokenFilters, "issued under %d, used under %d", i, j)
		}
		// Another tenant's list does not open it at all.
		_, err := decodeDeliveryToken(sig, "globex", &oncejobv1.ListDeliveriesRequest{Status: issued.Status, JobId: issued.JobId, Sink: issued.Sink, PageToken: token})
		require.ErrorIs(t, err, errDeliveryToken)
	}

	old := sig.Seal(pagetoken.Deliveries, "acme", fmt.Appendf(nil, "d1:%d:%d", cursor.Rank, cursor.ID))
	got, err := decodeDeliveryToken(sig, "acme", &oncejobv1.ListDeliveriesRequest{PageToken: old})
	require.NoError(t, err)
	require.Equal(t, cursor, got)
	for _, used := range filters[1:] {
		_, err := decodeDeliveryToken(sig, "acme", &oncejobv1.ListDeliveriesRequest{Status: used.Status, JobId: used.JobId, Sink: used.Sink, PageToken: old})
		require.ErrorIs(t, err, errDeliveryTokenFilters)
	}

	// Sealed, but not a token's form: refused as no token of ours.
	for _, payload := range []string{"", "d2:1:42:0", "d2:1:42:0:::x", "d3:1:42", "d2:3:42:0::", "d2:1:-1:0::", "d1:x:1"} {
		_, err := decodeDeliveryToken(sig, "acme", &oncejobv1.ListDeliveriesRequest{PageToken: sig.Seal(pagetoken.Deliveries, "acme", []byte(payload))})
		require.Error(t, err, "%q", payload)
	}
}
