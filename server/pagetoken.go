package server

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"

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
	if t.Status != int32(r.GetStatus()) || t.Pipeline != r.GetPipeline() || t.RunID != r.GetRunId() {
		return nil, errors.New("was issued for other filters; list again from the first page")
	}
	return &store.JobCursor{CreatedAt: time.UnixMicro(t.CreatedAtMicros).UTC(), ID: t.ID}, nil
}
