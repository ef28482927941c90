package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/server"
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
	bothStores(t, func(t *testing.T, st server.Store) {
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

// TestListRunBatches: a run's provider batches with its own lines, those
// answered and their cost; another tenant's run is NOT_FOUND, a bad id
// INVALID_ARGUMENT.
func TestListRunBatches(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st server.Store) {
		reg, err := pipeline.Parse([]byte(runBatchPipelines))
		require.NoError(t, err)
		b := setup(t, setupOpts{store: st, pipelines: reg, providerBatches: true})
		runs := oncejobv1.NewRunServiceClient(b.conn)
		run := createRun(t, runs, "run-batches", &oncejobv1.CreateRunRequest{Name: "nightly", Pipeline: "mixed", ProviderBatch: true})
		resp, err := b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{RunId: run.GetId(), Items: []*oncejobv1.SubmitJobsItem{
			{IdempotencyKey: "a", Request: &oncejobv1.SubmitJobRequest{Document: textDoc("a")}},
			{IdempotencyKey: "b", Request: &oncejobv1.SubmitJobRequest{Document: textDoc("b")}},
		}})
		require.NoError(t, err)

		empty, err := runs.ListRunBatches(as(keyAcme, ""), &oncejobv1.ListRunBatchesRequest{RunId: run.GetId()})
		require.NoError(t, err)
		require.Empty(t, empty.GetBatches(), "no call sent yet")

		engine := st.(interface {
			store.EngineStore
			store.ProviderBatchStore
		})
		for i, r := range resp.GetResults() {
			key := fmt.Sprint("pk-", i)
			require.NoError(t, engine.LLMAttemptRecord(t.Context(), &store.LLMAttemptRecordParams{Attempt: store.LLMAttempt{
				JobID: r.GetJob().GetId(), JobAttempt: 1, Stage: store.JobStageLLMDone, ProviderKey: key,
				Outcome: store.LLMOutcomeOutcomeUnknown, Error: "provider batch tag-1", PriceClass: store.PriceClassBatch,
			}}))
			if i == 0 {
				require.NoError(t, engine.LLMAttemptRecord(t.Context(), &store.LLMAttemptRecordParams{Attempt: store.LLMAttempt{
					JobID: r.GetJob().GetId(), JobAttempt: 1, Stage: store.JobStageLLMDone, ProviderKey: key, Outcome: store.LLMOutcomeSucceeded,
					Billed: true, PromptTokens: 100, CompletionTokens: 10, CostMicros: 65, ProviderRequestID: "req-1", PriceClass: store.PriceClassBatch,
				}}))
			}
		}
		created := time.Now().Add(-time.Minute)
		expires := created.Add(24 * time.Hour)
		require.NoError(t, engine.ProviderBatchRecord(t.Context(), &store.ProviderBatchRecordParams{
			Tag: "tag-1", BatchID: "batch_abc", Status: "finalizing", CreatedAt: created, ExpiresAt: &expires,
		}))

		got, err := runs.ListRunBatches(as(keyAcme, ""), &oncejobv1.ListRunBatchesRequest{RunId: run.GetId()})
		require.NoError(t, err)
		require.Len(t, got.GetBatches(), 1)
		rb := got.GetBatches()[0]
		require.Equal(t, "batch_abc", rb.GetBatchId())
		require.Equal(t, "finalizing", rb.GetStatus())
		require.EqualValues(t, 2, rb.GetLines())
		require.EqualValues(t, 1, rb.GetAnsweredLines())
		require.Equal(t, "batch", rb.GetPriceClass())
		require.EqualValues(t, 65, rb.GetCostMicros())
		require.WithinDuration(t, expires, rb.GetExpireTime().AsTime(), time.Millisecond)

		_, err = runs.ListRunBatches(as(keyGlobex, ""), &oncejobv1.ListRunBatchesRequest{RunId: run.GetId()})
		require.Equal(t, codes.NotFound, status.Code(err), "another tenant's run")
		_, err = runs.ListRunBatches(as(keyAcme, ""), &oncejobv1.ListRunBatchesRequest{RunId: "nope"})
		requireFieldViolation(t, err, "run_id", "")
	})
}

// TestSubmitBatchTwinRefusedWithoutBatchAPI: a job that names a batch twin
// on a server whose provider has no batch API is refused at once, the
// same job accepted where it has one.
func TestSubmitBatchTwinRefusedWithoutBatchAPI(t *testing.T) {
	t.Parallel()
	reg, err := pipeline.Parse([]byte(runBatchPipelines))
	require.NoError(t, err)
	req := &oncejobv1.SubmitJobRequest{Pipeline: "mixed", ModelProfile: "online@batch", Document: textDoc("a")}
	without := setup(t, setupOpts{pipelines: reg})
	_, err = without.client.SubmitJob(as(keyAcme, "twin-1"), req)
	requireFieldViolation(t, err, "model_profile", "no batch API")

	with := setup(t, setupOpts{pipelines: reg, providerBatches: true})
	resp, err := with.client.SubmitJob(as(keyAcme, "twin-1"), req)
	require.NoError(t, err)
	require.Equal(t, "online@batch", resp.GetJob().GetModelProfile())
	_, err = with.client.SubmitJob(as(keyAcme, "twin-2"), &oncejobv1.SubmitJobRequest{Pipeline: "mixed", ModelProfile: "other@batch", Document: textDoc("a")})
	requireFieldViolation(t, err, "model_profile", "allows")
}
