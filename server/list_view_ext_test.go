package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storetest"
)

// TestListSchedulesLeavesOutDocuments (issue #31, finding 6): 30
// schedules whose templates carry a maximal document (the server's limit,
// 1 MiB here) list in one page for a default client (4 MiB) — the CLI's
// `oncejob schedule list` makes this call — with each template's document
// left out but its name and media type; GetSchedule still has the
// document; SCHEDULE_VIEW_FULL pages hold the documents, at most 2 MiB of
// them past a page's first schedule, and walk to every schedule. On main
// before the view the page was every document: 30 MiB, refused by a
// default client (received message larger than max).
func TestListSchedulesLeavesOutDocuments(t *testing.T) {
	t.Parallel()
	const maxDoc, n = 1 << 20, 30
	bothStores(t, func(t *testing.T, st server.Store) {
		b := setup(t, setupOpts{store: st, maxDoc: maxDoc, quiet: true})
		schedules := oncejobv1.NewScheduleServiceClient(b.conn)
		docs := map[string]string{}
		for i := range n {
			req := submitReq(strings.Repeat(string(rune('a'+i%26)), maxDoc))
			resp, err := schedules.CreateSchedule(as(keyAcme, fmt.Sprintf("s-%d", i)), &oncejobv1.CreateScheduleRequest{
				Name: fmt.Sprintf("maximal %d", i), Spec: &oncejobv1.CreateScheduleRequest_Cron{Cron: "0 3 * * *"}, Job: req,
			})
			require.NoError(t, err)
			docs[resp.GetSchedule().GetId()] = req.GetDocument().GetText()
		}

		page, err := schedules.ListSchedules(as(keyAcme, ""), &oncejobv1.ListSchedulesRequest{PageSize: 100})
		require.NoError(t, err, "a default client lists 30 maximal schedules")
		require.Len(t, page.GetSchedules(), n)
		require.Empty(t, page.GetNextPageToken())
		size := proto.Size(page)
		t.Logf("BASIC page of %d maximal schedules: %d bytes", n, size)
		require.Less(t, size, 64<<10, "the page holds no documents")
		for _, s := range page.GetSchedules() {
			d := s.GetJob().GetDocument()
			require.Empty(t, d.GetText(), "schedule %s", s.GetId())
			require.Empty(t, d.GetData())
			require.Equal(t, "doc.txt", d.GetName())
			require.Equal(t, "text/plain", d.GetMediaType())
			require.Equal(t, "summarize", s.GetJob().GetPipeline())
		}

		got, err := schedules.GetSchedule(as(keyAcme, ""), &oncejobv1.GetScheduleRequest{ScheduleId: page.GetSchedules()[0].GetId()})
		require.NoError(t, err)
		require.Equal(t, docs[got.GetSchedule().GetId()], got.GetSchedule().GetJob().GetDocument().GetText(), "GetSchedule has the document")

		full := map[string]string{}
		req := &oncejobv1.ListSchedulesRequest{PageSize: 100, View: oncejobv1.ScheduleView_SCHEDULE_VIEW_FULL}
		pages := 0
		for {
			page, err := schedules.ListSchedules(as(keyAcme, ""), req)
			require.NoError(t, err)
			pages++
			require.NotEmpty(t, page.GetSchedules())
			require.LessOrEqual(t, proto.Size(page), 2<<20+2*maxDoc+64<<10, "a FULL page is bounded in bytes")
			for _, s := range page.GetSchedules() {
				full[s.GetId()] = s.GetJob().GetDocument().GetText()
			}
			if page.GetNextPageToken() == "" {
				break
			}
			req.PageToken = page.GetNextPageToken()
		}
		require.Equal(t, docs, full, "FULL pages walk to every schedule with its document")
		require.GreaterOrEqual(t, pages, n*maxDoc/(2<<20+maxDoc), "FULL pages are cut by bytes")

		_, err = schedules.ListSchedules(as(keyAcme, ""), &oncejobv1.ListSchedulesRequest{View: 7})
		requireFieldViolation(t, err, "view", "unknown view")
	})
}

// TestListJobsFullView: ListJobs' JOB_VIEW_FULL fills each job's
// checkpoints and attempts as GetJob does; BASIC (the default) has none.
func TestListJobsFullView(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *watchBundle) {
		ctx := t.Context()
		id := submit(t, b.client, keyAcme, "listed in full")
		jobs, err := b.store.JobClaim(ctx, &store.JobClaimParams{Owner: "w", Limit: 1, LeaseDuration: time.Minute})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		require.NoError(t, storetest.CheckpointWrite(ctx, b.store, &storetest.CheckpointWriteParams{
			Lease: lease(jobs[0]), Stage: store.JobStageTextExtracted, Chunk: -1, StageKey: "stage:v1:text",
			CodeVersion: "3", Output: []byte("twelve bytes"), AdvanceStage: true, Message: "text_extracted: computed",
		}))
		basic, err := b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{})
		require.NoError(t, err)
		require.Len(t, basic.GetJobs(), 1)
		require.Empty(t, basic.GetJobs()[0].GetCheckpoints())
		full, err := b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{View: oncejobv1.JobView_JOB_VIEW_FULL})
		require.NoError(t, err)
		require.Len(t, full.GetJobs(), 1)
		require.Equal(t, id, full.GetJobs()[0].GetId())
		require.Len(t, full.GetJobs()[0].GetCheckpoints(), 1)
		_, err = b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{View: 9})
		requireFieldViolation(t, err, "view", "unknown view")
	})
}
