package llm_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/llmsim"
)

type testBundle struct {
	sim    *llmsim.Running
	client *llm.OpenAIClient
}

type setupOpts struct {
	faults  llmsim.Faults
	timeout time.Duration // default 5s
}

func setup(t *testing.T, opts setupOpts) *testBundle {
	t.Helper()
	sim, err := llmsim.Start("", llmsim.Config{Faults: opts.faults})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sim.Close()) })
	if opts.timeout == 0 {
		opts.timeout = 5 * time.Second
	}
	client := newClient(t, llm.Config{BaseURL: sim.URL, LookupPath: llmsim.LookupPath, Timeout: opts.timeout})
	return &testBundle{sim: sim, client: client}
}

// newClient returns a client on a transport of its own, closed with the test
// so no connection outlives it.
func newClient(t *testing.T, cfg llm.Config) *llm.OpenAIClient {
	t.Helper()
	if cfg.HTTPClient == nil {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		t.Cleanup(transport.CloseIdleConnections)
		cfg.HTTPClient = &http.Client{Transport: transport}
	}
	client, err := llm.NewOpenAI(cfg)
	require.NoError(t, err)
	return client
}

func request(key, document string) *llm.Request {
	return &llm.Request{
		Model: "sim-1",
		Messages: []llm.Message{
			{Role: "system", Content: "You summarize documents."},
			{Role: "user", Content: "Summarize the following document.\n\n" + document},
		},
		ProviderKey: key,
	}
}

func requireClass(t *testing.T, err error, want llm.Class) *llm.Error {
	t.Helper()
	require.Error(t, err)
	class, ok := llm.ClassOf(err)
	require.True(t, ok, "unclassified error: %v", err)
	require.Equal(t, want, class, "error: %v", err)
	var e *llm.Error
	require.ErrorAs(t, err, &e)
	return e
}

const document = "The quarterly invoice run moved to Tuesdays. Finance asked for one reminder per customer and no duplicates."

func TestGenerateReturnsSummarizeShape(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	resp, err := b.client.Generate(t.Context(), request("job-1:llm:0", document))
	require.NoError(t, err)

	var out struct {
		Summary   string   `json:"summary"`
		KeyPoints []string `json:"key_points"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.Content), &out), resp.Content)
	require.Equal(t, "The quarterly invoice run moved to Tuesdays. Finance asked for one reminder", out.Summary)
	require.Len(t, out.KeyPoints, 2)
	require.Equal(t, "sim-1", resp.Model)
	require.Equal(t, "stop", resp.FinishReason)
	require.Positive(t, resp.PromptTokens)
	require.Positive(t, resp.CompletionTokens)
	require.True(t, strings.HasPrefix(resp.ProviderRequestID, "req_"), resp.ProviderRequestID)
	require.False(t, resp.Replayed)
}

func TestOutputIsDeterministicAcrossSimulators(t *testing.T) {
	t.Parallel()
	first, second := setup(t, setupOpts{}), setup(t, setupOpts{})
	a, err := first.client.Generate(t.Context(), request("k", document))
	require.NoError(t, err)
	b, err := second.client.Generate(t.Context(), request("k", document))
	require.NoError(t, err)
	require.Equal(t, a.Content, b.Content)
	require.Equal(t, a.ProviderRequestID, b.ProviderRequestID, "keyed ids depend on key and input only")

	other, err := first.client.Generate(t.Context(), request("k2", document+" One more sentence."))
	require.NoError(t, err)
	require.NotEqual(t, a.Content, other.Content)
}

func TestSameKeyBillsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	first, err := b.client.Generate(t.Context(), request("job-2:llm:0", document))
	require.NoError(t, err)
	again, err := b.client.Generate(t.Context(), request("job-2:llm:0", document))
	require.NoError(t, err)

	require.Equal(t, first.Content, again.Content)
	require.Equal(t, first.ProviderRequestID, again.ProviderRequestID)
	require.True(t, again.Replayed)
	st := b.sim.Stats()
	require.EqualValues(t, 1, st.BilledCalls)
	require.EqualValues(t, 1, st.ReplayedCalls)
	require.EqualValues(t, 1, st.CallsByKey["job-2:llm:0"])
	require.EqualValues(t, 2, st.RequestsByKey["job-2:llm:0"])
}

func TestNoKeyBillsEveryCall(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	first, err := b.client.Generate(t.Context(), request("", document))
	require.NoError(t, err)
	second, err := b.client.Generate(t.Context(), request("", document))
	require.NoError(t, err)
	require.Equal(t, first.Content, second.Content)
	require.NotEqual(t, first.ProviderRequestID, second.ProviderRequestID)
	require.EqualValues(t, 2, b.sim.Stats().BilledCalls)
	_, err = b.client.Lookup(t.Context(), "")
	requireClass(t, err, llm.ClassInvalidRequest)
}

func TestConcurrentSameKeyBillsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{faults: llmsim.Faults{Latency: llmsim.Duration(50 * time.Millisecond)}})
	const n = 16
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := b.client.Generate(t.Context(), request("job-3:llm:0", document))
			if !assertNoError(t, err) {
				return
			}
			ids[i] = resp.ProviderRequestID
		})
	}
	wg.Wait()
	for _, id := range ids {
		require.Equal(t, ids[0], id)
	}
	st := b.sim.Stats()
	require.EqualValues(t, 1, st.BilledCalls)
	require.EqualValues(t, n-1, st.ReplayedCalls)
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

func TestRateLimitedCarriesRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{faults: llmsim.Faults{
		RateLimit: &llmsim.RateLimit{Trigger: llmsim.Trigger{Count: 1}, RetryAfter: llmsim.Duration(1500 * time.Millisecond)},
	}})
	_, err := b.client.Generate(t.Context(), request("job-4:llm:0", document))
	e := requireClass(t, err, llm.ClassRateLimited)
	require.Equal(t, 1500*time.Millisecond, e.RetryAfter, "retry-after-ms wins over the rounded Retry-After")
	require.Equal(t, http.StatusTooManyRequests, e.StatusCode)
	require.Equal(t, "simulated rate limit", e.Message)
	require.EqualValues(t, 0, b.sim.Stats().BilledCalls)

	_, err = b.client.Generate(t.Context(), request("job-4:llm:0", document))
	require.NoError(t, err, "count 1: the retry passes")
	require.EqualValues(t, 1, b.sim.Stats().BilledCalls)
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{faults: llmsim.Faults{Unavailable: &llmsim.Unavailable{Trigger: llmsim.Trigger{Count: 2}}}})
	for range 2 {
		_, err := b.client.Generate(t.Context(), request("job-5:llm:0", document))
		e := requireClass(t, err, llm.ClassUnavailable)
		require.Equal(t, http.StatusServiceUnavailable, e.StatusCode)
	}
	_, err := b.client.Generate(t.Context(), request("job-5:llm:0", document))
	require.NoError(t, err)
	require.EqualValues(t, 1, b.sim.Stats().BilledCalls)
}

func TestHangIsOutcomeUnknownAndBillsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{
		faults:  llmsim.Faults{Hang: &llmsim.Trigger{Count: 1}},
		timeout: 200 * time.Millisecond,
	})
	_, err := b.client.Generate(t.Context(), request("job-6:llm:0", document))
	e := requireClass(t, err, llm.ClassOutcomeUnknown)
	require.Zero(t, e.StatusCode)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	_, err = b.client.Lookup(t.Context(), "job-6:llm:0")
	require.ErrorIs(t, err, llm.ErrNotFound, "a hung call is never stored")
	require.EqualValues(t, 0, b.sim.Stats().BilledCalls)

	resp, err := b.client.Generate(t.Context(), request("job-6:llm:0", document))
	require.NoError(t, err)
	require.False(t, resp.Replayed)
	require.EqualValues(t, 1, b.sim.Stats().BilledCalls)
}

func TestBillThenTimeoutIsRecoveredByLookupAndRetry(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{
		faults:  llmsim.Faults{BillThenTimeout: &llmsim.BillThenTimeout{Trigger: llmsim.Trigger{Count: 1}}},
		timeout: 200 * time.Millisecond,
	})
	const key = "job-7:llm:0"
	_, err := b.client.Generate(t.Context(), request(key, document))
	requireClass(t, err, llm.ClassOutcomeUnknown)
	// The request was sent; on a loaded machine the client's 200 ms can end
	// before the simulator's handler has run, and the bill follows.
	require.Eventually(t, func() bool { return b.sim.Stats().BilledCalls == 1 }, 10*time.Second, 5*time.Millisecond,
		"the provider billed the call the client gave up on")

	found, err := b.client.Lookup(t.Context(), key)
	require.NoError(t, err)
	require.Contains(t, found.Content, `"summary"`)

	retried, err := b.client.Generate(t.Context(), request(key, document))
	require.NoError(t, err)
	require.True(t, retried.Replayed)
	require.Equal(t, found.Content, retried.Content)
	require.Equal(t, found.ProviderRequestID, retried.ProviderRequestID)
	st := b.sim.Stats()
	require.EqualValues(t, 1, st.BilledCalls)
	require.EqualValues(t, 1, st.CallsByKey[key])
}

func TestBillThenTimeoutWithDelayAnswersPatientClient(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{faults: llmsim.Faults{
		BillThenTimeout: &llmsim.BillThenTimeout{Trigger: llmsim.Trigger{Count: 1}, Delay: llmsim.Duration(50 * time.Millisecond)},
	}})
	resp, err := b.client.Generate(t.Context(), request("job-8:llm:0", document))
	require.NoError(t, err, "a client that waits longer than the delay gets the answer")
	require.NotEmpty(t, resp.Content)
}

func TestInvalidRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	_, err := b.client.Generate(t.Context(), request("job-9:llm:0", "please "+llmsim.MarkerInvalidRequest))
	e := requireClass(t, err, llm.ClassInvalidRequest)
	require.Equal(t, http.StatusBadRequest, e.StatusCode)

	_, err = b.client.Generate(t.Context(), request("job-10:llm:0", document))
	require.NoError(t, err)
	_, err = b.client.Generate(t.Context(), request("job-10:llm:0", "another document"))
	e = requireClass(t, err, llm.ClassInvalidRequest)
	require.Equal(t, http.StatusUnprocessableEntity, e.StatusCode, "a key reused for other content is refused")
	require.EqualValues(t, 1, b.sim.Stats().BilledCalls)
}

func TestRequestValidatedBeforeSending(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for name, req := range map[string]*llm.Request{
		"no model":    {Messages: []llm.Message{{Role: "user", Content: "x"}}},
		"no messages": {Model: "m"},
		"bad key":     {Model: "m", Messages: []llm.Message{{Role: "user", Content: "x"}}, ProviderKey: "a\nb"},
		"bad format":  {Model: "m", Messages: []llm.Message{{Role: "user", Content: "x"}}, ResponseFormat: json.RawMessage("{")},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := b.client.Generate(t.Context(), req)
			requireClass(t, err, llm.ClassInvalidRequest)
		})
	}
	require.EqualValues(t, 0, b.sim.Stats().Requests)
}

func TestInvalidOutputIsBilledAndReturned(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	resp, err := b.client.Generate(t.Context(), request("job-11:llm:0", "poison "+llmsim.MarkerInvalidOutput))
	require.NoError(t, err, "the provider answered; the validator judges the content")
	require.False(t, json.Valid([]byte(resp.Content)), resp.Content)
	require.EqualValues(t, 1, b.sim.Stats().BilledCalls)
}

func TestMaxTokensCutsContent(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	req := request("job-12:llm:0", document)
	req.MaxTokens = 3
	resp, err := b.client.Generate(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, "length", resp.FinishReason)
	require.EqualValues(t, 3, resp.CompletionTokens)
}

func TestResponseFormatSchemaIsFollowed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	req := request("job-13:llm:0", document)
	req.ResponseFormat = json.RawMessage(`{"type":"json_schema","json_schema":{"name":"out","strict":true,"schema":{
		"type":"object","additionalProperties":false,"required":["label","score","urgent"],
		"properties":{"label":{"enum":["invoice","receipt"]},"score":{"type":"integer","minimum":1,"maximum":5},"urgent":{"type":"boolean"}}}}}`)
	resp, err := b.client.Generate(t.Context(), req)
	require.NoError(t, err)
	var out struct {
		Label  string `json:"label"`
		Score  int    `json:"score"`
		Urgent *bool  `json:"urgent"`
	}
	dec := json.NewDecoder(strings.NewReader(resp.Content))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&out), resp.Content)
	require.Contains(t, []string{"invoice", "receipt"}, out.Label)
	require.GreaterOrEqual(t, out.Score, 1)
	require.LessOrEqual(t, out.Score, 5)
	require.NotNil(t, out.Urgent)
}

// TestLookupUnsupportedWithoutLookupPath: without a LookupPath the client
// says so up front (CanLookup) and Lookup agrees; with one it can.
func TestLookupUnsupportedWithoutLookupPath(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	client := newClient(t, llm.Config{BaseURL: b.sim.URL})
	require.False(t, client.CanLookup())
	_, err := client.Lookup(t.Context(), "any")
	require.ErrorIs(t, err, llm.ErrLookupUnsupported)
	require.True(t, newClient(t, llm.Config{BaseURL: b.sim.URL, LookupPath: llmsim.LookupPath}).CanLookup())
}

func TestLookupKeyIsEscaped(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const key = "tenant/a b:llm:0?x=1"
	resp, err := b.client.Generate(t.Context(), request(key, document))
	require.NoError(t, err)
	found, err := b.client.Lookup(t.Context(), key)
	require.NoError(t, err)
	require.Equal(t, resp.Content, found.Content)
	require.Equal(t, resp.ProviderRequestID, found.ProviderRequestID)
}

func TestConnectionRefusedIsUnavailable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	client := newClient(t, llm.Config{BaseURL: "http://" + addr + "/v1", LookupPath: llmsim.LookupPath})
	_, err = client.Generate(t.Context(), request("job-14:llm:0", document))
	e := requireClass(t, err, llm.ClassUnavailable)
	require.Zero(t, e.StatusCode)
	_, err = client.Lookup(t.Context(), "job-14:llm:0")
	requireClass(t, err, llm.ClassUnavailable)
}

func TestTimeoutBeforeSendingIsUnavailable(t *testing.T) {
	t.Parallel()
	// A provider that never accepts. The transport dials on a context of
	// its own, outliving the request, so the test releases the dial itself.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	transport := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		select {
		case <-ctx.Done():
		case <-release:
		}
		return nil, net.ErrClosed
	}}
	client := newClient(t, llm.Config{
		BaseURL:    "http://provider.invalid/v1",
		HTTPClient: &http.Client{Transport: transport},
		Timeout:    100 * time.Millisecond,
	})
	_, err := client.Generate(t.Context(), request("job-15:llm:0", document))
	requireClass(t, err, llm.ClassUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestConnectionLostAfterSendingIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // the provider has the whole request...
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close() // ...and dies before answering
		}
	}))
	t.Cleanup(srv.Close)
	client := newClient(t, llm.Config{BaseURL: srv.URL})
	_, err := client.Generate(t.Context(), request("job-16:llm:0", document))
	requireClass(t, err, llm.ClassOutcomeUnknown)
}

// TestStatusClassification covers answers the simulator does not give.
func TestStatusClassification(t *testing.T) {
	t.Parallel()
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	at, err := http.ParseTime(date)
	require.NoError(t, err)
	for _, tc := range []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		class      llm.Class
		retryAfter time.Duration
		retryAt    time.Time // a date's: RetryAfter is the time left to it when the answer was read
		message    string
	}{
		{name: "429 seconds", status: 429, header: map[string]string{"Retry-After": "7"}, class: llm.ClassRateLimited, retryAfter: 7 * time.Second},
		{name: "429 date", status: 429, header: map[string]string{"Retry-After": date}, class: llm.ClassRateLimited, retryAt: at},
		{name: "429 no hint", status: 429, class: llm.ClassRateLimited},
		{name: "429 quota", status: 429, body: `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, class: llm.ClassInvalidRequest, message: "You exceeded your current quota"},
		{name: "500", status: 500, class: llm.ClassUnavailable},
		{name: "502 html", status: 502, body: "<html>bad gateway</html>", class: llm.ClassUnavailable, message: "<html>bad gateway</html>"},
		{name: "503 retry-after", status: 503, header: map[string]string{"Retry-After": "2"}, class: llm.ClassUnavailable, retryAfter: 2 * time.Second},
		{name: "504", status: 504, class: llm.ClassUnavailable},
		{name: "529 overloaded", status: 529, class: llm.ClassUnavailable},
		{name: "409 in flight", status: 409, class: llm.ClassUnavailable},
		{name: "400", status: 400, body: `{"error":{"message":"bad","type":"invalid_request_error","code":null}}`, class: llm.ClassInvalidRequest, message: "bad"},
		{name: "401", status: 401, class: llm.ClassInvalidRequest, message: "Unauthorized"},
		{name: "404 model", status: 404, class: llm.ClassInvalidRequest},
		{name: "200 not json", status: 200, body: "<html>proxy</html>", class: llm.ClassOutcomeUnknown},
		{name: "200 no choices", status: 200, body: `{"id":"x","choices":[]}`, class: llm.ClassOutcomeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			client := newClient(t, llm.Config{BaseURL: srv.URL})
			sent := time.Now()
			_, err := client.Generate(t.Context(), request("k", document))
			answered := time.Now()
			e := requireClass(t, err, tc.class)
			require.Equal(t, tc.status, e.StatusCode)
			switch {
			case !tc.retryAt.IsZero():
				// Read between the call's start and its end, however long
				// a loaded machine made it.
				require.GreaterOrEqual(t, e.RetryAfter, tc.retryAt.Sub(answered))
				require.LessOrEqual(t, e.RetryAfter, tc.retryAt.Sub(sent))
			default:
				require.Equal(t, tc.retryAfter, e.RetryAfter)
			}
			if tc.message != "" {
				require.Equal(t, tc.message, e.Message)
			}
		})
	}
}

func TestSendsProtocolHeadersAndBody(t *testing.T) {
	t.Parallel()
	var got struct {
		auth, key string
		body      map[string]any
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.auth, got.key = r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key")
		_ = json.NewDecoder(r.Body).Decode(&got.body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","model":"m-2024","choices":[{"message":{"content":null},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":3,"completion_tokens":0}}`)
	}))
	t.Cleanup(srv.Close)
	client := newClient(t, llm.Config{BaseURL: srv.URL + "/", APIKey: "sk-test"})
	req := request("job-17:llm:0", document)
	req.ResponseFormat = json.RawMessage(`{"type":"json_object"}`)
	req.Temperature = 0.2
	resp, err := client.Generate(t.Context(), req)
	require.NoError(t, err)

	require.Equal(t, "Bearer sk-test", got.auth)
	require.Equal(t, "job-17:llm:0", got.key)
	require.Equal(t, "sim-1", got.body["model"])
	require.Equal(t, 0.2, got.body["temperature"])
	require.Equal(t, map[string]any{"type": "json_object"}, got.body["response_format"])
	require.NotContains(t, got.body, "max_tokens")
	require.Len(t, got.body["messages"], 2)

	require.Equal(t, &llm.Response{
		PromptTokens: 3, ProviderRequestID: "chatcmpl-1", Model: "m-2024", FinishReason: "content_filter",
	}, resp, "without x-request-id the body id identifies the call")
}
