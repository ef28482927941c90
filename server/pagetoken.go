package server

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/store"
)

// A page token is the cursor of a page's last job and the filters it was
// made under, so a token cannot silently be used with other filters. It is
// opaque to clients: base64url of JSON, neither signed nor secret — it holds
// nothing the client could not list anyway, and every query is tenant-scoped.
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

func encodePageToken(c *store.JobCursor, r *oncejobv1.ListJobsRequest) string {
	b, _ := json.Marshal(pageToken{
		CreatedAtMicros: c.CreatedAt.UnixMicro(),
		ID:              c.ID,
		Status:          int32(r.GetStatus()),
		Pipeline:        r.GetPipeline(),
		RunID:           r.GetRunId(),
	})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePageToken(s string, r *oncejobv1.ListJobsRequest) (*store.JobCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("is not a token this server issued")
	}
	var t pageToken
	if err := json.Unmarshal(b, &t); err != nil || t.ID == "" {
		return nil, errors.New("is not a token this server issued")
	}
	// Parsed before use: an id that is no UUID would reach the store's uuid
	// column and fail there, and a time outside the store's range likewise.
	if _, err := uuid.Parse(t.ID); err != nil || t.CreatedAtMicros < minTokenMicros || t.CreatedAtMicros > maxTokenMicros {
		return nil, errors.New("is not a token this server issued")
	}
	if t.Status != int32(r.GetStatus()) || t.Pipeline != r.GetPipeline() || t.RunID != r.GetRunId() {
		return nil, errors.New("was issued for other filters; list again from the first page")
	}
	return &store.JobCursor{CreatedAt: time.UnixMicro(t.CreatedAtMicros).UTC(), ID: t.ID}, nil
}
