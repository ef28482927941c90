package server_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
)

// requireBadInput asserts what any input the server cannot take gets:
// INVALID_ARGUMENT naming the field, and no retry hint (it would fail again).
func requireBadInput(t *testing.T, err error, field, says string) {
	t.Helper()
	requireFieldViolation(t, err, field, says)
	for _, d := range status.Convert(err).Details() {
		_, retry := d.(*errdetails.RetryInfo)
		require.False(t, retry, "a request that can never succeed carries no retry hint")
	}
}

// TestNULInADocumentIsRefusedAtSubmit: a document's text with NUL, and a
// text document's bytes with NUL, are refused before anything is written,
// on both stores (issue 20, finding 2).
func TestNULInADocumentIsRefusedAtSubmit(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st server.Store) {
		b := setup(t, setupOpts{store: st})
		_, err := b.client.SubmitJob(as(keyAcme, "nul-text"), submitReq("a\x00b"))
		requireBadInput(t, err, "document.text", "NUL")

		for _, media := range []string{"text/plain", "text/markdown; charset=utf-8", "text/html", "application/json"} {
			req := submitReq("")
			req.Document.Content = &oncejobv1.Document_Data{Data: []byte("{\"a\": \"b\x00\"}")}
			req.Document.MediaType = media
			_, err = b.client.SubmitJob(as(keyAcme, "nul-data"), req)
			requireBadInput(t, err, "document.data", "NUL")
		}

		batch, err := b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{Items: []*oncejobv1.SubmitJobsItem{
			{IdempotencyKey: "ok", Request: submitReq("fine")},
			{IdempotencyKey: "bad", Request: submitReq("not\x00fine")},
		}})
		require.NoError(t, err)
		require.NotNil(t, batch.GetResults()[0].GetJob(), "a bad item fails alone")
		requireBadInput(t, status.FromProto(batch.GetResults()[1].GetError()).Err(), "items[1].request.document.text", "NUL")
		require.Len(t, listAll(t, b.client, keyAcme), 1)
	})
}

// TestBadTextIsInvalidArgumentNotAnOutage: NUL in any text field, and a page
// token whose id is no UUID, get INVALID_ARGUMENT naming the field — never
// UNAVAILABLE STORE_UNAVAILABLE, which clients retry (issue 20, finding 3).
func TestBadTextIsInvalidArgumentNotAnOutage(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st server.Store) {
		b := setup(t, setupOpts{store: st, quiet: true})
		runs := oncejobv1.NewRunServiceClient(b.conn)
		schedules := oncejobv1.NewScheduleServiceClient(b.conn)
		job, err := b.client.SubmitJob(as(keyAcme, "j"), submitReq("report"))
		require.NoError(t, err)
		id := job.GetJob().GetId()
		token := base64.RawURLEncoding.EncodeToString([]byte(`{"t":1700000000000000,"id":"not-a-uuid"}`))

		for _, tc := range []struct {
			name, field string
			call        func() error
		}{
			{"run name", "name", func() error {
				_, err := runs.CreateRun(as(keyAcme, "r"), &oncejobv1.CreateRunRequest{Name: "nightly\x00"})
				return err
			}},
			{"schedule name", "name", func() error {
				_, err := schedules.CreateSchedule(as(keyAcme, "s"), &oncejobv1.CreateScheduleRequest{
					Name: "nightly\x00", Spec: &oncejobv1.CreateScheduleRequest_Cron{Cron: "0 3 * * *"}, Job: submitReq("x"),
				})
				return err
			}},
			{"cancel reason", "reason", func() error {
				_, err := b.client.CancelJob(as(keyAcme, "c"), &oncejobv1.CancelJobRequest{JobId: id, Reason: "why\x00"})
				return err
			}},
			{"replay reason", "reason", func() error {
				_, err := b.client.ReplayJob(as(keyAcme, "rp"), &oncejobv1.ReplayJobRequest{JobId: id, Reason: "why\x00"})
				return err
			}},
			{"approve reason", "reason", func() error {
				_, err := b.client.ApproveJob(as(keyAcme, "a"), &oncejobv1.ApproveJobRequest{JobId: id, Approve: true, Reason: "why\x00"})
				return err
			}},
			{"list pipeline filter", "pipeline", func() error {
				_, err := b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{Pipeline: "summ\x00"})
				return err
			}},
			{"count pipeline filter", "pipeline", func() error {
				_, err := b.client.CountJobs(as(keyAcme, ""), &oncejobv1.CountJobsRequest{Pipeline: "summ\x00"})
				return err
			}},
			{"watch pipeline filter", "pipeline", func() error {
				s, err := b.client.WatchJobs(as(keyAcme, ""), &oncejobv1.WatchJobsRequest{Pipeline: "summ\x00"})
				if err != nil {
					return err
				}
				_, err = s.Recv()
				return err
			}},
			{"label", "labels.k", func() error {
				req := submitReq("x")
				req.Labels = map[string]string{"k": "v\x00"}
				_, err := b.client.SubmitJob(as(keyAcme, "l"), req)
				return err
			}},
			{"list page token id", "page_token", func() error {
				_, err := b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{PageToken: token})
				return err
			}},
			{"runs page token id", "page_token", func() error {
				_, err := runs.ListRuns(as(keyAcme, ""), &oncejobv1.ListRunsRequest{PageToken: token})
				return err
			}},
			{"schedules page token id", "page_token", func() error {
				_, err := schedules.ListSchedules(as(keyAcme, ""), &oncejobv1.ListSchedulesRequest{PageToken: token})
				return err
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				requireBadInput(t, tc.call(), tc.field, "")
			})
		}
		require.Len(t, listAll(t, b.client, keyAcme), 1, "nothing else written")
	})
}

// TestParamsAreBounded: one value over 64 KiB, params over 256 KiB in all
// and nesting past 32 levels are refused; a 5 MB param would otherwise make
// every later answer about the tenant's jobs too large for the clients
// (issue 20, finding 4).
func TestParamsAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	submit := func(key string, params map[string]any) error {
		req := submitReq("report")
		p, err := structpb.NewStruct(params)
		require.NoError(t, err)
		req.Params = p
		_, err = b.client.SubmitJob(as(keyAcme, key), req)
		return err
	}
	requireBadInput(t, submit("huge", map[string]any{"blob": strings.Repeat("x", 5<<20)}), "params.blob", "64")
	requireBadInput(t, submit("value", map[string]any{"blob": strings.Repeat("x", 64<<10)}), "params.blob", "64")
	many := map[string]any{}
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		many[k] = strings.Repeat("x", 60<<10) // each under the value limit, 300 KiB in all
	}
	requireBadInput(t, submit("total", many), "params", "256")
	deep := any("leaf")
	for range 40 {
		deep = map[string]any{"n": deep}
	}
	requireBadInput(t, submit("deep", map[string]any{"tree": deep}), "params.tree", "nests deeper")
	wide := []any{}
	for range 10000 {
		wide = append(wide, 1.5)
	}
	requireBadInput(t, submit("wide", map[string]any{"list": wide}), "params.list", "64")
	require.Empty(t, listAll(t, b.client, keyAcme))

	// Just under every limit is accepted.
	fits := map[string]any{"a": strings.Repeat("x", 60<<10), "b": strings.Repeat("y", 60<<10)}
	require.NoError(t, submit("fits", fits))
	require.Len(t, listAll(t, b.client, keyAcme), 1)
}
