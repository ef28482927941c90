package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/store"
)

const runBatchPipelines = `
model_profiles:
  online: {model: m, prompt_micros_per_1k: 1000, completion_micros_per_1k: 3000}
  nightly: {model: m, prompt_micros_per_1k: 1000, completion_micros_per_1k: 3000, provider_batch: {max_calls: 10}}
pipelines:
  - name: mixed
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [online, nightly]
    output_schema: {type: object}
`

// TestRunProviderBatch: a provider_batch run echoes the option, gives its
// items the batch twin of their profile (the pipeline's default, the
// run's, the item's own; a profile with a provider_batch is its own twin),
// says it waits on a batch window, and is its own intent: the same key
// without the option is another request.
func TestRunProviderBatch(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st store.Store) {
		reg, err := pipeline.Parse([]byte(runBatchPipelines))
		require.NoError(t, err)
		b := setup(t, setupOpts{store: st, pipelines: reg, providerBatches: true})
		runs := oncejobv1.NewRunServiceClient(b.conn)
		run := createRun(t, runs, "run-batch", &oncejobv1.CreateRunRequest{Name: "nightly", Pipeline: "mixed", ProviderBatch: true})
		require.True(t, run.GetProviderBatch())

		plain := createRun(t, runs, "run-plain", &oncejobv1.CreateRunRequest{Name: "online", Pipeline: "mixed"})
		require.False(t, plain.GetProviderBatch())
		require.Nil(t, plain.GetProgress().GetProviderBatchWindow())

		_, err = runs.CreateRun(as(keyAcme, "run-batch"), &oncejobv1.CreateRunRequest{Name: "nightly", Pipeline: "mixed"})
		requireReason(t, err, codes.InvalidArgument, "IDEMPOTENCY_KEY_REUSED")

		items := []*oncejobv1.SubmitJobsItem{
			{IdempotencyKey: "default", Request: &oncejobv1.SubmitJobRequest{Document: textDoc("a")}},
			{IdempotencyKey: "online", Request: &oncejobv1.SubmitJobRequest{Document: textDoc("b"), ModelProfile: "online"}},
			{IdempotencyKey: "nightly", Request: &oncejobv1.SubmitJobRequest{Document: textDoc("c"), ModelProfile: "nightly"}},
		}
		resp, err := b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{RunId: run.GetId(), Items: items})
		require.NoError(t, err)
		var profiles []string
		for _, r := range resp.GetResults() {
			require.Nil(t, r.GetError())
			profiles = append(profiles, r.GetJob().GetModelProfile())
		}
		require.Equal(t, []string{"online@batch", "online@batch", "nightly"}, profiles)

		got, err := runs.GetRun(as(keyAcme, ""), &oncejobv1.GetRunRequest{RunId: run.GetId()})
		require.NoError(t, err)
		p := got.GetRun().GetProgress()
		require.True(t, got.GetRun().GetProviderBatch())
		require.Equal(t, "24h0m0s", p.GetProviderBatchWindow().AsDuration().String())
		require.Equal(t, p.GetProviderBatchWindow().AsDuration(), p.GetEstimatedTimeLeft().AsDuration(), "no rate yet: the window")

		// The items of a plain run keep their profile.
		resp, err = b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{RunId: plain.GetId(), Items: []*oncejobv1.SubmitJobsItem{
			{IdempotencyKey: "plain", Request: &oncejobv1.SubmitJobRequest{Document: textDoc("d")}},
		}})
		require.NoError(t, err)
		require.Equal(t, "online", resp.GetResults()[0].GetJob().GetModelProfile())
	})
}

// TestRunProviderBatchRefusedWithoutBatchAPI: a server whose provider has
// no batch API refuses a provider_batch run, saying why, and creates none.
func TestRunProviderBatchRefusedWithoutBatchAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	runs := oncejobv1.NewRunServiceClient(b.conn)
	_, err := runs.CreateRun(as(keyAcme, "run-refused"), &oncejobv1.CreateRunRequest{Name: "n", ProviderBatch: true})
	requireReason(t, err, codes.InvalidArgument, "PROVIDER_BATCH_UNSUPPORTED")
	st, _ := status.FromError(err)
	require.Contains(t, st.Message(), "no batch API")
	var field string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			field = br.GetFieldViolations()[0].GetField()
		}
	}
	require.Equal(t, "provider_batch", field)
	list, err := runs.ListRuns(as(keyAcme, ""), &oncejobv1.ListRunsRequest{})
	require.NoError(t, err)
	require.Empty(t, list.GetRuns())
	// Without the option the same key is free.
	run := createRun(t, runs, "run-refused", &oncejobv1.CreateRunRequest{Name: "n"})
	require.False(t, run.GetProviderBatch())
}

func textDoc(text string) *oncejobv1.Document {
	return &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: text}}
}
