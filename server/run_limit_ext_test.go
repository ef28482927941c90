package server_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/server"
)

const runLimitPipelines = `
provider_limits:
  account: {requests_per_minute: 120}
model_profiles:
  paced: {model: m, shared_limit: account}
  free: {model: m}
pipelines:
  - name: paced
    version: 1
    prompt: {version: "1", template: "Summarize: {{.Text}}"}
    model_profiles: [paced, free]
    output_schema: {type: object}
`

// TestRunPriorityAndLimit: a run's items are batch work of their run, a
// single job interactive, and either may ask otherwise (an unknown
// priority is INVALID_ARGUMENT); a run's progress names the provider limit
// its profile draws from and the time its items left need at that limit's
// pace (none on a profile with no limit known).
func TestRunPriorityAndLimit(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st server.Store) {
		reg, err := pipeline.Parse([]byte(runLimitPipelines))
		require.NoError(t, err)
		b := setup(t, setupOpts{store: st, pipelines: reg})
		runs := oncejobv1.NewRunServiceClient(b.conn)
		run := createRun(t, runs, "run-paced", &oncejobv1.CreateRunRequest{Name: "paced", Pipeline: "paced"})

		const items = 30
		var req []*oncejobv1.SubmitJobsItem
		for i := range items {
			req = append(req, &oncejobv1.SubmitJobsItem{IdempotencyKey: fmt.Sprintf("item-%d", i), Request: &oncejobv1.SubmitJobRequest{Document: textDoc(fmt.Sprintf("doc %d", i))}})
		}
		req[0].Request.Priority = oncejobv1.Priority_PRIORITY_INTERACTIVE
		resp, err := b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{RunId: run.GetId(), Items: req})
		require.NoError(t, err)
		for i, r := range resp.GetResults() {
			require.Nil(t, r.GetError())
			want := oncejobv1.Priority_PRIORITY_BATCH
			if i == 0 {
				want = oncejobv1.Priority_PRIORITY_INTERACTIVE
			}
			require.Equal(t, want, r.GetJob().GetPriority(), "item %d", i)
			require.Equal(t, run.GetId(), r.GetJob().GetRunId())
		}

		single, err := b.client.SubmitJob(as(keyAcme, "single"), &oncejobv1.SubmitJobRequest{Pipeline: "paced", Document: textDoc("alone")})
		require.NoError(t, err)
		require.Equal(t, oncejobv1.Priority_PRIORITY_INTERACTIVE, single.GetJob().GetPriority())
		require.Empty(t, single.GetJob().GetRunId())
		got, err := b.client.GetJob(as(keyAcme, ""), &oncejobv1.GetJobRequest{JobId: resp.GetResults()[1].GetJob().GetId()})
		require.NoError(t, err)
		require.Equal(t, oncejobv1.Priority_PRIORITY_BATCH, got.GetJob().GetPriority())
		require.Nil(t, got.GetJob().GetNextAttemptTime(), "queued: no next try")

		batch, err := b.client.SubmitJob(as(keyAcme, "batch"), &oncejobv1.SubmitJobRequest{Pipeline: "paced", Document: textDoc("bulk"), Priority: oncejobv1.Priority_PRIORITY_BATCH})
		require.NoError(t, err)
		require.Equal(t, oncejobv1.Priority_PRIORITY_BATCH, batch.GetJob().GetPriority())
		_, err = b.client.SubmitJob(as(keyAcme, "odd"), &oncejobv1.SubmitJobRequest{Pipeline: "paced", Document: textDoc("odd"), Priority: 9})
		requireFieldViolation(t, err, "priority", "must be PRIORITY_INTERACTIVE")

		// 30 items at 120 a minute: 15 s.
		r, err := runs.GetRun(as(keyAcme, ""), &oncejobv1.GetRunRequest{RunId: run.GetId()})
		require.NoError(t, err)
		p := r.GetRun().GetProgress()
		require.Equal(t, "account", p.GetLimit().GetName())
		require.EqualValues(t, 120, p.GetLimit().GetRequestsPerMinute())
		require.EqualValues(t, 120, p.GetLimit().GetConfiguredRequestsPerMinute())
		require.Equal(t, "15s", p.GetLimitTimeLeft().AsDuration().String())

		free := createRun(t, runs, "run-free", &oncejobv1.CreateRunRequest{Name: "free", Pipeline: "paced", ModelProfile: "free"})
		_, err = b.client.SubmitJobs(as(keyAcme, ""), &oncejobv1.SubmitJobsRequest{RunId: free.GetId(), Items: req[:1]})
		require.NoError(t, err)
		r, err = runs.GetRun(as(keyAcme, ""), &oncejobv1.GetRunRequest{RunId: free.GetId()})
		require.NoError(t, err)
		require.Equal(t, "free", r.GetRun().GetProgress().GetLimit().GetName())
		require.Nil(t, r.GetRun().GetProgress().GetLimitTimeLeft(), "no rate known")
	})
}
