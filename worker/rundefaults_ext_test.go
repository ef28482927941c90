package worker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/store"
)

// promptRecorder is a provider that keeps every prompt it is sent.
type promptRecorder struct {
	llm.Provider
	mu      sync.Mutex
	prompts []string
}

func (p *promptRecorder) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	p.mu.Lock()
	for _, m := range req.Messages {
		p.prompts = append(p.prompts, m.Content)
	}
	p.mu.Unlock()
	return p.Provider.Generate(ctx, req)
}

// TestRunItemRunsWithItsRunsParams: a job of a run, whose row holds only
// the item's own params (the run's are stored once, on its row:
// docs/architecture.md, "Runs"), is claimed with the run's under its own:
// its prompt renders both, the item's winning, and its LLM stage has the
// key of a job submitted with the merged params, whose result the decision
// cache then answers without a second call.
func TestRunItemRunsWithItsRunsParams(t *testing.T) {
	t.Parallel()
	b := setup(t, llmsim.Faults{})
	reg := registry(t, `  - name: summarize
    version: 1
    prompt: {version: "1", template: "Summarize in {{.Params.lang}}, {{.Params.tone}}: {{.Text}}"}
    model_profiles: [default]
    output_schema: `+summarizeSchema+"\n")
	st := b.store.(store.Store)
	runs := b.store.(store.RunStore)
	ctx := t.Context()
	run, err := runs.RunCreate(ctx, &store.RunCreateParams{ID: uuid.NewString(), Tenant: "acme", IdempotencyKey: "r", Fingerprint: "f",
		Name: "n", Pipeline: "summarize", Params: []byte(`{"lang":"French","tone":"dry"}`), Labels: map[string]string{"run": "1"}})
	require.NoError(t, err)

	const text = "A document read once, by a run and by a plain job."
	sum := sha256.Sum256([]byte(text))
	job := func(runID, params string) *store.JobSubmitParams {
		key := uuid.NewString() // its own dedup key: only the stage keys can share the call
		return &store.JobSubmitParams{ID: uuid.NewString(), Tenant: "acme", Method: "/oncejob.v1.JobService/SubmitJob",
			IdempotencyKey: key, Fingerprint: "fp", DedupKey: "dedup:" + key,
			Pipeline: "summarize", PipelineVersion: 1, PromptVersion: "1", ModelProfile: "default",
			Document: []byte(text), DocumentSHA256: hex.EncodeToString(sum[:]), DocumentMedia: "text/plain", Params: []byte(params), RunID: runID}
	}
	item := job(run.Run.ID, `{"tone":"warm"}`)
	_, err = st.JobSubmit(ctx, item)
	require.NoError(t, err)

	provider, err := llm.NewOpenAI(llm.Config{BaseURL: b.sim.URL, LookupPath: llmsim.LookupPath})
	require.NoError(t, err)
	recorder := &promptRecorder{Provider: provider}
	_, stop := b.runWorkerOn(t, reg, recorder)
	first := waitTerminal(t, b.store, &store.Job{ID: item.ID, Tenant: "acme"})
	require.Equal(t, store.JobStatusSucceeded, first.Status)
	recorder.mu.Lock()
	require.NotEmpty(t, recorder.prompts)
	require.True(t, strings.HasPrefix(recorder.prompts[0], "Summarize in French, warm: "), recorder.prompts[0])
	recorder.mu.Unlock()
	stop()

	plain := job("", `{"lang":"French","tone":"warm"}`)
	_, err = st.JobSubmit(ctx, plain)
	require.NoError(t, err)
	calls := b.sim.Stats().BilledCalls
	b.runWorkerOn(t, reg, recorder)
	second := waitTerminal(t, b.store, &store.Job{ID: plain.ID, Tenant: "acme"})
	require.Equal(t, store.JobStatusSucceeded, second.Status)
	require.Equal(t, calls, b.sim.Stats().BilledCalls, "the plain job's LLM stage had another key than the run's item's")
}
