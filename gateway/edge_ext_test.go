package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// A body within the body limit whose request is over the gRPC server's
// message limit (JSON text of a document over --max-document-bytes plus
// 1 MiB) is 413 problem+json without Retry-After, not the rate limit's
// 429: no retry can succeed. Nothing is written; the key stays free. Sizes
// 0, 1 and many bytes over the limit, and one at it, which is accepted as
// far as size goes.
func TestBodyOverTheServersMessageLimitIs413(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{}) // default limits: 17 MiB bodies, 9 MiB messages
	const messageLimit = 9 << 20
	key := uuid.NewString()
	header := map[string]string{"Authorization": bearer(keyAcme), "Idempotency-Key": key}
	body := func(textBytes int) []byte {
		return []byte(`{"pipeline": "summarize", "document": {"text": "` + strings.Repeat("x", textBytes) + `"}}`)
	}
	for _, over := range []int{1, 2, 100 << 10, 7 << 20} {
		r := goClient{}.do(t, "POST", b.base+"/v1/jobs", header, body(messageLimit+over))
		p := requireProblem(t, r, http.StatusRequestEntityTooLarge, "REQUEST_BODY_TOO_LARGE")
		require.Empty(t, r.header.Get("Retry-After"), "no retry can succeed")
		require.Equal(t, "9437184", p["metadata"].(map[string]any)["limit_bytes"])
		require.Contains(t, p["detail"], "over the server's limit")
	}
	list := goClient{}.do(t, "GET", b.base+"/v1/jobs", header, nil)
	require.Equal(t, http.StatusOK, list.status)
	jobs, _ := decode(t, list)["jobs"].([]any)
	require.Empty(t, jobs, "nothing was written")

	// A document at the document limit fits the message limit: the
	// server's validation, not the size, decides it.
	r := goClient{}.do(t, "POST", b.base+"/v1/jobs", header, body(8<<20))
	require.Equal(t, http.StatusOK, r.status, "%.300s", r.body)
}

// GET /healthz answers 200 whatever unrelated headers a proxy or client
// adds: an Idempotency-Key (valid, malformed or repeated), a request id,
// a bearer key nobody knows.
func TestHealthzIgnoresUnrelatedHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, header := range []map[string]string{
		{},
		{"Idempotency-Key": uuid.NewString()},
		{"Idempotency-Key": "naïve key"},
		{"Idempotency-Key": strings.Repeat("k", 300)},
		{"Idempotency-Key": "k", "X-Request-Id": "health-1", "Authorization": bearer("nobody")},
	} {
		r := goClient{}.do(t, "GET", b.base+"/healthz", header, nil)
		require.Equal(t, http.StatusOK, r.status, "headers %v: %s", header, r.body)
	}
}
