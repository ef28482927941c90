package main_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm"
)

// batchSim is `oncejob llm-sim --batch-delay delay` in a process of its own.
func batchSim(t *testing.T, delay time.Duration) (*simProc, *llm.OpenAIClient) {
	t.Helper()
	addr := freeAddr(t)
	p := start(t, "llm-sim", nil, "llm-sim", "--addr", addr, "--batch-delay", delay.String())
	t.Cleanup(p.stop)
	s := &simProc{proc: p, base: "http://" + addr}
	require.Eventually(t, func() bool {
		resp, err := http.Get(s.base + "/v1/oncejob/stats")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, 20*time.Second, 50*time.Millisecond)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(transport.CloseIdleConnections)
	client, err := llm.NewOpenAI(llm.Config{BaseURL: s.base + "/v1", Batches: true, Timeout: 10 * time.Second, HTTPClient: &http.Client{Transport: transport}})
	require.NoError(t, err)
	return s, client
}

func batchRequests(prefix string, n int) []*llm.Request {
	calls := make([]*llm.Request, n)
	for i := range calls {
		calls[i] = &llm.Request{
			Model:       "sim-1",
			Messages:    []llm.Message{{Role: "user", Content: fmt.Sprintf("Summarise.\n\nItem %d of %s, worth %d.", i, prefix, i*11)}},
			ProviderKey: fmt.Sprintf("%s:%03d", prefix, i),
		}
	}
	return calls
}

// waitFinished polls the batch until it has finished, requiring its statuses
// to move only forwards.
func waitFinished(t *testing.T, client *llm.OpenAIClient, id string) *llm.Batch {
	t.Helper()
	order := map[string]int{llm.BatchValidating: 0, llm.BatchInProgress: 1, llm.BatchFinalizing: 2, llm.BatchCompleted: 3, llm.BatchExpired: 3, llm.BatchFailed: 3}
	last := -1
	var b *llm.Batch
	require.Eventually(t, func() bool {
		var err error
		b, err = client.GetBatch(t.Context(), id)
		require.NoError(t, err)
		rank, ok := order[b.Status]
		require.True(t, ok, "unexpected status %s", b.Status)
		require.GreaterOrEqual(t, rank, last, "status went back to %s", b.Status)
		last = rank
		return b.Finished()
	}, 30*time.Second, 20*time.Millisecond)
	return b
}

// TestProviderBatchSimulatorProcess: the simulator as an external process
// serves the Batch API over --batch-delay. A lost answer to create, found
// again by the tag; a tenth of the lines failed and retried in a second
// batch: every call billed once at the batch price, none online.
func TestProviderBatchSimulatorProcess(t *testing.T) {
	t.Parallel()
	sim, client := batchSim(t, 300*time.Millisecond)
	sim.setFaults(t, `{"batch_create_lost":{"count":1},"batch_line_fail":{"every":10}}`)
	since := time.Now().Add(-time.Minute)
	calls := batchRequests("e2e", 60)

	_, err := llm.EnsureBatch(t.Context(), client, "e2e-1", since, calls, nil, llm.EnsureHooks{})
	class, _ := llm.ClassOf(err)
	require.Equal(t, llm.ClassOutcomeUnknown, class, "the answer to create was lost: %v", err)
	first, err := llm.EnsureBatch(t.Context(), client, "e2e-1", since, calls, nil, llm.EnsureHooks{})
	require.NoError(t, err)
	first = waitFinished(t, client, first.ID)
	require.Equal(t, llm.BatchCompleted, first.Status)
	results, err := client.BatchResults(t.Context(), first)
	require.NoError(t, err)
	byKey := map[string]*llm.Request{}
	for _, c := range calls {
		byKey[c.ProviderKey] = c
	}
	var retry []*llm.Request
	for _, r := range results {
		require.Contains(t, byKey, r.CustomID)
		if r.Err != nil {
			require.True(t, llm.Retryable(r.Err.Class), "%v", r.Err)
			retry = append(retry, byKey[r.CustomID])
		}
	}
	require.Len(t, results, 60)
	require.Len(t, retry, 6)

	sim.setFaults(t, `{}`)
	second, err := llm.EnsureBatch(t.Context(), client, "e2e-2", since, retry, nil, llm.EnsureHooks{})
	require.NoError(t, err)
	second = waitFinished(t, client, second.ID)
	require.Equal(t, 6, second.Completed)

	st := sim.stats(t)
	require.EqualValues(t, 2, st.BatchesCreated)
	require.EqualValues(t, 2, st.FilesUploaded)
	require.EqualValues(t, 60, st.BatchBilledCalls)
	require.Zero(t, st.BilledCalls)
	for _, c := range calls {
		require.EqualValues(t, 1, st.BatchCallsByKey[c.ProviderKey], "%s billed once", c.ProviderKey)
	}
}

// TestProviderBatchSimulatorCancel: a cancelled batch in progress ends
// cancelled and bills nothing.
func TestProviderBatchSimulatorCancel(t *testing.T) {
	t.Parallel()
	sim, client := batchSim(t, time.Hour)
	b, err := llm.EnsureBatch(t.Context(), client, "e2e-cancel", time.Now().Add(-time.Minute), batchRequests("cancel", 5), nil, llm.EnsureHooks{})
	require.NoError(t, err)
	got, err := client.CancelBatch(t.Context(), b.ID)
	require.NoError(t, err)
	require.Equal(t, llm.BatchCancelling, got.Status)
	got = waitFinishedOrCancelled(t, client, b.ID)
	require.Equal(t, llm.BatchCancelled, got.Status)
	st := sim.stats(t)
	require.EqualValues(t, 1, st.BatchesCancelled)
	require.Zero(t, st.BatchBilledCalls)

	_, errOut, code := cli{t: t}.run("", "llm-sim", "--batch-delay", "-1s")
	require.NotZero(t, code)
	require.True(t, strings.Contains(errOut, "--batch-delay"), errOut)
}

func waitFinishedOrCancelled(t *testing.T, client *llm.OpenAIClient, id string) *llm.Batch {
	t.Helper()
	var b *llm.Batch
	require.Eventually(t, func() bool {
		var err error
		b, err = client.GetBatch(t.Context(), id)
		require.NoError(t, err)
		return b.Finished()
	}, 30*time.Second, 20*time.Millisecond)
	return b
}
