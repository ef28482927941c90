package server

import (
	"context"
	"slices"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
)

// CountJobs counts the caller's jobs per status. Read-only: no
// idempotency contract.
func (s *jobService) CountJobs(ctx context.Context, req *oncejobv1.CountJobsRequest) (*oncejobv1.CountJobsResponse, error) {
	t, _ := tenant.FromContext(ctx)
	counts, err := s.cfg.Store.JobCountByStatus(ctx, &store.JobCountByStatusParams{Tenant: t, Pipeline: req.GetPipeline()})
	if err != nil {
		return nil, s.storeError(ctx, err, "jobs")
	}
	resp := &oncejobv1.CountJobsResponse{}
	for st, n := range counts {
		resp.Counts = append(resp.Counts, &oncejobv1.JobStatusCount{Status: statusToProto[st], Count: n})
		resp.Total += n
	}
	slices.SortFunc(resp.Counts, func(a, b *oncejobv1.JobStatusCount) int { return int(a.GetStatus() - b.GetStatus()) })
	return resp, nil
}
