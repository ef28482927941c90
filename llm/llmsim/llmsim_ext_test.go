package llmsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm/llmsim"
)

func start(t *testing.T, cfg llmsim.Config) *llmsim.Running {
	t.Helper()
	sim, err := llmsim.Start("", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sim.Close()) })
	return sim
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, method, u, key string, body string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	resp, err := (&http.Client{Transport: transport}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, resp.Header, data}
}

func chat(t *testing.T, sim *llmsim.Running, key, text string) answer {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"model":    "sim-1",
		"messages": []any{map[string]any{"role": "user", "content": text}},
	})
	require.NoError(t, err)
	return do(t, http.MethodPost, sim.URL+"/chat/completions", key, string(body))
}

func TestChatCompletionProtocol(t *testing.T) {
	t.Parallel()
	sim := start(t, llmsim.Config{})
	// Content as an array of parts, as some clients send it.
	a := do(t, http.MethodPost, sim.URL+"/chat/completions", "k1", `{"model":"sim-1","stream":false,
		"messages":[{"role":"user","content":[{"type":"text","text":"Alpha beta gamma."}]}]}`)
	require.Equal(t, http.StatusOK, a.status, string(a.body))
	require.Equal(t, "application/json", a.header.Get("Content-Type"))
	require.NotEmpty(t, a.header.Get("X-Request-Id"))

	var cc struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message      struct{ Role, Content string } `json:"message"`
			FinishReason string                         `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal(a.body, &cc))
	require.True(t, strings.HasPrefix(cc.ID, "chatcmpl-sim-"))
	require.Equal(t, "chat.completion", cc.Object)
	require.Equal(t, "assistant", cc.Choices[0].Message.Role)
	require.Contains(t, cc.Choices[0].Message.Content, `"summary":"Alpha beta gamma."`)
	require.Contains(t, cc.Choices[0].Message.Content, `"sim_digest":"`)
	require.Equal(t, 3, cc.Usage.PromptTokens)
	require.Equal(t, cc.Usage.PromptTokens+cc.Usage.CompletionTokens, cc.Usage.TotalTokens)

	root := strings.TrimSuffix(sim.URL, "/v1")
	for _, base := range []string{root, sim.URL} {
		found := do(t, http.MethodGet, base+llmsim.LookupPath+"/k1", "", "")
		require.Equal(t, http.StatusOK, found.status)
		require.Equal(t, a.body, found.body, "the lookup returns the stored answer byte for byte")
		require.Equal(t, a.header.Get("X-Request-Id"), found.header.Get("X-Request-Id"))
	}
	require.Equal(t, http.StatusNotFound, do(t, http.MethodGet, root+llmsim.LookupPath+"/"+url.PathEscape("nope/x"), "", "").status)

	var st llmsim.Stats
	require.NoError(t, json.Unmarshal(do(t, http.MethodGet, root+"/oncejob/stats", "", "").body, &st))
	require.EqualValues(t, 1, st.BilledCalls)
	require.EqualValues(t, 3, st.BilledPromptTokens)
	require.Equal(t, map[string]int64{"k1": 1}, st.CallsByKey)
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	sim := start(t, llmsim.Config{})
	for name, body := range map[string]string{
		"not json":    `{`,
		"no model":    `{"messages":[{"role":"user","content":"x"}]}`,
		"no messages": `{"model":"m","messages":[]}`,
		"marker":      `{"model":"m","messages":[{"role":"user","content":"SIM_INVALID_REQUEST"}]}`,
	} {
		a := do(t, http.MethodPost, sim.URL+"/chat/completions", "k-"+name, body)
		require.Equal(t, http.StatusBadRequest, a.status, name)
		require.Contains(t, string(a.body), `"error":{`, name)
	}
	st := sim.Stats()
	require.EqualValues(t, 4, st.Requests)
	require.EqualValues(t, 0, st.BilledCalls)
}

func TestFaultScheduleIsCountBased(t *testing.T) {
	t.Parallel()
	sim := start(t, llmsim.Config{})
	set := do(t, http.MethodPost, sim.URL+"/oncejob/faults", "", `{"unavailable":{"every":2,"count":2,"status":502}}`)
	require.Equal(t, http.StatusOK, set.status, string(set.body))

	var statuses []int
	for range 6 {
		statuses = append(statuses, chat(t, sim, "", "hello").status)
	}
	require.Equal(t, []int{200, 502, 200, 502, 200, 200}, statuses)

	got := do(t, http.MethodGet, sim.URL+"/oncejob/faults", "", "")
	require.JSONEq(t, `{"unavailable":{"every":2,"count":2,"status":502}}`, string(got.body))
}

func TestFaultOrderAndKeyPattern(t *testing.T) {
	t.Parallel()
	sim := start(t, llmsim.Config{Faults: llmsim.Faults{
		RateLimit:   &llmsim.RateLimit{Trigger: llmsim.Trigger{Count: 1, KeyPattern: "^job-a:"}, RetryAfter: llmsim.Duration(1200 * time.Millisecond)},
		Unavailable: &llmsim.Unavailable{Trigger: llmsim.Trigger{Count: 1, KeyPattern: "^job-a:"}},
	}})
	require.Equal(t, http.StatusOK, chat(t, sim, "job-b:llm:0", "x").status, "other keys are not seen")
	limited := chat(t, sim, "job-a:llm:0", "x")
	require.Equal(t, http.StatusTooManyRequests, limited.status)
	require.Equal(t, "2", limited.header.Get("Retry-After"), "whole seconds, rounded up")
	require.Equal(t, "1200", limited.header.Get("Retry-After-Ms"))
	require.Equal(t, http.StatusServiceUnavailable, chat(t, sim, "job-a:llm:0", "x").status)
	require.Equal(t, http.StatusOK, chat(t, sim, "job-a:llm:0", "x").status)
	require.EqualValues(t, 3, sim.Stats().RequestsByKey["job-a:llm:0"])
}

func TestInvalidFaultsAreRefused(t *testing.T) {
	t.Parallel()
	sim := start(t, llmsim.Config{})
	for _, body := range []string{
		`{"rate_limt":{}}`,
		`{"latency":"soon"}`,
		`{"latency":5}`,
		`{"hang":{"key_pattern":"("}}`,
		`{"unavailable":{"status":200}}`,
		`{"bill_then_timeout":{"count":-1}}`,
	} {
		require.Equal(t, http.StatusBadRequest, do(t, http.MethodPost, sim.URL+"/oncejob/faults", "", body).status, body)
	}
	_, err := llmsim.New(llmsim.Config{Faults: llmsim.Faults{Latency: -1}})
	require.Error(t, err)
}

func TestResetForgetsCallsAndRearmsFaults(t *testing.T) {
	t.Parallel()
	sim := start(t, llmsim.Config{Faults: llmsim.Faults{Unavailable: &llmsim.Unavailable{Trigger: llmsim.Trigger{Count: 1}}}})
	require.Equal(t, http.StatusServiceUnavailable, chat(t, sim, "k", "x").status)
	require.Equal(t, http.StatusOK, chat(t, sim, "k", "x").status)

	require.Equal(t, http.StatusNoContent, do(t, http.MethodPost, sim.URL+"/oncejob/reset", "", "").status)
	require.Equal(t, llmsim.Stats{CallsByKey: map[string]int64{}, RequestsByKey: map[string]int64{}, BatchCallsByKey: map[string]int64{}, RateLimitedBy: map[string]int64{}}, sim.Stats())
	require.Equal(t, http.StatusNotFound, do(t, http.MethodGet, sim.URL+llmsim.LookupPath+"/k", "", "").status)
	require.Equal(t, http.StatusServiceUnavailable, chat(t, sim, "k", "x").status, "Config.Faults armed again")
}

func TestInvalidOutputMarker(t *testing.T) {
	t.Parallel()
	sim := start(t, llmsim.Config{})
	a := chat(t, sim, "k", "poison "+llmsim.MarkerInvalidOutput)
	require.Equal(t, http.StatusOK, a.status)
	var cc struct {
		Choices []struct{ Message struct{ Content string } } `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(a.body, &cc))
	require.False(t, json.Valid([]byte(cc.Choices[0].Message.Content)))
}

func TestCloseReleasesHeldCalls(t *testing.T) {
	t.Parallel()
	sim, err := llmsim.Start("", llmsim.Config{Faults: llmsim.Faults{Hang: &llmsim.Trigger{}}})
	require.NoError(t, err)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	done := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: transport}).Post(sim.URL+"/chat/completions", "application/json",
			bytes.NewBufferString(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return sim.Stats().Requests == 1 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, sim.Close())
	require.Error(t, <-done, "a hung call gets no answer, not an empty 200")
	require.NoError(t, sim.Close(), "Close is idempotent")
}

func TestRunServesUntilCancelled(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- llmsim.Run(ctx, addr, llmsim.Config{}, nil) }()
	require.Eventually(t, func() bool {
		transport := &http.Transport{}
		defer transport.CloseIdleConnections()
		resp, err := (&http.Client{Transport: transport}).Get("http://" + addr + "/oncejob/stats")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 5*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}
