package llm_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/llmsim"
)

func TestRateLimitHeadersOnAnswersAnd429s(t *testing.T) {
	t.Parallel()
	sim, err := llmsim.Start("", llmsim.Config{Limits: llmsim.Limits{Requests: 2, Tokens: 100000, Window: time.Minute}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sim.Close()) })
	client := newClient(t, llm.Config{BaseURL: sim.URL})

	resp, err := client.Generate(t.Context(), request("", document))
	require.NoError(t, err)
	require.NotNil(t, resp.RateLimits)
	require.EqualValues(t, 2, resp.RateLimits.Requests.Limit)
	require.EqualValues(t, 1, resp.RateLimits.Requests.Remaining)
	rate, ok := resp.RateLimits.Requests.PerSecond()
	require.True(t, ok)
	require.InDelta(t, 0.5/30, rate, 0.002, "one missing of 2 per minute, reset in 30s: half of one is missing on average")
	require.EqualValues(t, 100000, resp.RateLimits.Tokens.Limit)

	_, err = client.Generate(t.Context(), request("", document+" again"))
	require.NoError(t, err)
	_, err = client.Generate(t.Context(), request("", document+" once more"))
	e := requireClass(t, err, llm.ClassRateLimited)
	require.NotNil(t, e.RateLimits, "a 429 carries the headers too")
	require.EqualValues(t, 0, e.RateLimits.Requests.Remaining)
	require.Greater(t, e.RetryAfter, 25*time.Second)
}

func TestRateLimitHeadersReadAsOpenAIWritesThem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    *llm.RateLimits
	}{
		{"none", nil, nil},
		{"openai", map[string]string{
			"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59", "x-ratelimit-reset-requests": "1s",
			"x-ratelimit-limit-tokens": "150000", "x-ratelimit-remaining-tokens": "149984", "x-ratelimit-reset-tokens": "6m0s",
		}, &llm.RateLimits{
			Requests: llm.RateLimit{Limit: 60, Remaining: 59, Reset: time.Second},
			Tokens:   llm.RateLimit{Limit: 150000, Remaining: 149984, Reset: 6 * time.Minute},
		}},
		{"fractions and bare seconds", map[string]string{
			"x-ratelimit-limit-requests": "10", "x-ratelimit-remaining-requests": "4", "x-ratelimit-reset-requests": "7.5",
		}, &llm.RateLimits{Requests: llm.RateLimit{Limit: 10, Remaining: 4, Reset: 7500 * time.Millisecond}}},
		{"garbage is ignored", map[string]string{
			"x-ratelimit-limit-requests": "-3", "x-ratelimit-limit-tokens": "many",
		}, nil},
		{"remaining above the limit is the limit", map[string]string{
			"x-ratelimit-limit-tokens": "10", "x-ratelimit-remaining-tokens": "99", "x-ratelimit-reset-tokens": "junk",
		}, &llm.RateLimits{Tokens: llm.RateLimit{Limit: 10, Remaining: 10}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				for k, v := range tc.headers {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"id":"x","choices":[{"message":{"content":"{}"},"finish_reason":"stop"}]}`))
			}))
			t.Cleanup(srv.Close)
			resp, err := newClient(t, llm.Config{BaseURL: srv.URL}).Generate(t.Context(), request("", document))
			require.NoError(t, err)
			require.Equal(t, tc.want, resp.RateLimits)
		})
	}
}
