package server

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server/pagetoken"
	"github.com/oncejob/oncejob/store"
)

// A page token of ListJobs, ListRuns or ListSchedules is the cursor of a
// page's last row and, for ListJobs, the filters it was made under, so a
// token cannot silently be used with other filters. It is JSON sealed by
// pagetoken for its list and the caller's tenant (docs/architecture.md,
// "Page tokens"): opaque to clients, and read back only by a server of
// the same store, for the same list and tenant.
type pageToken struct {
	CreatedAtMicros int64  `json:"t"`
	ID              string `json:"id"`
	Status          int32  `json:"s,omitempty"`
	Pipeline        string `json:"p,omitempty"`
	RunID           string `json:"r,omitempty"`
}

// The times a token may hold: years 1 to 9999, what both stores keep.
var (
	minTokenMicros = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	maxTokenMicros = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).UnixMicro()
)

var errPageToken = errors.New("is not a token this server issued for this list (or its secret has changed since); list again from the first page")

// encodePageToken returns the token of the page after c; r is the ListJobs
// request of the page, nil for the other lists.
func encodePageToken(sig *pagetoken.Signer, kind pagetoken.Kind, tenant string, c *store.JobCursor, r *oncejobv1.ListJobsRequest) string {
	b, _ := json.Marshal(pageToken{
		CreatedAtMicros: c.CreatedAt.UnixMicro(),
		ID:              c.ID,
		Status:          int32(r.GetStatus()),
		Pipeline:        r.GetPipeline(),
		RunID:           r.GetRunId(),
	})
	return sig.Seal(kind, tenant, b)
}

// decodePageToken checks a token's seal, then parses it fully: nothing of
// it reaches the store unparsed.
func decodePageToken(sig *pagetoken.Signer, kind pagetoken.Kind, tenant, s string, r *oncejobv1.ListJobsRequest) (*store.JobCursor, error) {
	b, err := sig.Open(kind, tenant, s)
	if err != nil {
		return nil, errPageToken
	}
	var t pageToken
	if err := json.Unmarshal(b, &t); err != nil || t.ID == "" {
		return nil, errPageToken
	}
	// An id that is no UUID would reach the store's uuid column and fail
	// there, and a time outside the store's range likewise; only the
	// canonical form is one we wrote. A signed token is trusted to be ours,
	// not to be well formed.
	if id, err := uuid.Parse(t.ID); err != nil || id.String() != t.ID || t.CreatedAtMicros < minTokenMicros || t.CreatedAtMicros > maxTokenMicros {
		return nil, errPageToken
	}
	if t.Status != int32(r.GetStatus()) || t.Pipeline != r.GetPipeline() || t.RunID != r.GetRunId() {
		return nil, errors.New("was issued for other filters; list again from the first page")
	}
	return &store.JobCursor{CreatedAt: time.UnixMicro(t.CreatedAtMicros).UTC(), ID: t.ID}, nil
}

// pageTokenError is a bad page_token's INVALID_ARGUMENT.
func pageTokenError(err error) error {
	var v violations
	v.add("page_token", "%s", err)
	return v.err()
}
