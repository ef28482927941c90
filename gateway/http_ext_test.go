package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store/storesqlite"
)

func bearer(key string) string { return "Bearer " + key }

const submitBody = `{"pipeline": "summarize", "document": {"text": "Invoice 42: 3 licences, EUR 1,200.", "name": "invoice-42.txt"}, "labels": {"source": "http"}}`

func decode(t *testing.T, r response) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body %s", r.body)
	return m
}

// requireProblem checks an RFC 9457 problem+json answer and returns it.
func requireProblem(t *testing.T, r response, status int, reason string) map[string]any {
	t.Helper()
	require.Equal(t, status, r.status, "body %s", r.body)
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
	p := decode(t, r)
	require.EqualValues(t, status, p["status"])
	require.Equal(t, http.StatusText(status), p["title"])
	require.NotEmpty(t, p["detail"])
	require.NotEmpty(t, p["code"])
	if reason == "" {
		require.Equal(t, "about:blank", p["type"])
		require.Nil(t, p["reason"])
	} else {
		require.Equal(t, reason, p["reason"])
		require.Equal(t, "urn:oncejob:problem:"+reason, p["type"])
		require.Equal(t, "oncejob.dev", p["domain"])
	}
	require.Equal(t, r.header.Get("X-Request-Id"), p["request_id"], "the problem names the request")
	require.NotEmpty(t, p["request_id"])
	return p
}

// The IETF Idempotency-Key draft over HTTP: 400 without a key, the job and
// Idempotent-Replayed on a replay, 422 for the key with another request —
// and one job in the end.
func TestSubmitIdempotencyKeyOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	forEachClient(t, func(t *testing.T, c httpClient) {
		key := "invoice-42-" + c.name() + "-" + uuid.NewString()
		auth := map[string]string{"Authorization": bearer(keyAcme), "Content-Type": "application/json"}
		withKey := map[string]string{"Authorization": bearer(keyAcme), "Content-Type": "application/json", "Idempotency-Key": key, "X-Request-Id": "req-" + key}

		missing := c.do(t, "POST", b.base+"/v1/jobs", auth, []byte(submitBody))
		p := requireProblem(t, missing, http.StatusBadRequest, "IDEMPOTENCY_KEY_INVALID")
		require.Equal(t, "INVALID_ARGUMENT", p["code"])
		require.Contains(t, p["detail"], "idempotency-key")

		created := c.do(t, "POST", b.base+"/v1/jobs", withKey, []byte(submitBody))
		require.Equal(t, http.StatusOK, created.status, "body %s", created.body)
		require.Equal(t, "application/json", created.header.Get("Content-Type"))
		require.Empty(t, created.header.Get("Idempotent-Replayed"))
		require.Equal(t, "req-"+key, created.header.Get("X-Request-Id"), "the client's request id comes back")
		first := decode(t, created)
		require.Equal(t, "SUBMIT_OUTCOME_CREATED", first["outcome"])
		job := first["job"].(map[string]any)
		require.Equal(t, key, job["idempotency_key"])
		require.Equal(t, "JOB_STATUS_QUEUED", job["status"])
		require.Equal(t, "invoice-42.txt", job["document_name"])

		replay := c.do(t, "POST", b.base+"/v1/jobs", withKey, []byte(submitBody))
		require.Equal(t, http.StatusOK, replay.status, "body %s", replay.body)
		require.Equal(t, "true", replay.header.Get("Idempotent-Replayed"))
		again := decode(t, replay)
		require.Equal(t, "SUBMIT_OUTCOME_EXISTING", again["outcome"])
		require.Equal(t, job["id"], again["job"].(map[string]any)["id"])

		other := strings.Replace(submitBody, "Invoice 42", "Invoice 43", 1)
		reused := c.do(t, "POST", b.base+"/v1/jobs", withKey, []byte(other))
		p = requireProblem(t, reused, http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED")
		require.Equal(t, "INVALID_ARGUMENT", p["code"])
		require.Empty(t, reused.header.Get("Idempotent-Replayed"))

		// One job for the key, whatever was sent.
		list := c.do(t, "GET", b.base+"/v1/jobs?page_size=500", auth, nil)
		require.Equal(t, http.StatusOK, list.status)
		n := 0
		for _, j := range decode(t, list)["jobs"].([]any) {
			if j.(map[string]any)["idempotency_key"] == key {
				n++
			}
		}
		require.Equal(t, 1, n)
	})
}

func TestAnotherTenantsJobIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	forEachClient(t, func(t *testing.T, c httpClient) {
		created := c.do(t, "POST", b.base+"/v1/jobs", map[string]string{
			"Authorization": bearer(keyAcme), "Idempotency-Key": uuid.NewString(),
		}, []byte(submitBody))
		require.Equal(t, http.StatusOK, created.status)
		id := decode(t, created)["job"].(map[string]any)["id"].(string)

		own := c.do(t, "GET", b.base+"/v1/jobs/"+id, map[string]string{"Authorization": bearer(keyAcme)}, nil)
		require.Equal(t, http.StatusOK, own.status)
		require.Equal(t, id, decode(t, own)["job"].(map[string]any)["id"])

		globex := map[string]string{"Authorization": bearer(keyGlobex), "Idempotency-Key": uuid.NewString()}
		for _, r := range []response{
			c.do(t, "GET", b.base+"/v1/jobs/"+id, globex, nil),
			c.do(t, "GET", b.base+"/v1/jobs/"+id+"?view=JOB_VIEW_FULL", globex, nil),
			c.do(t, "POST", b.base+"/v1/jobs/"+id+":cancel", globex, []byte(`{}`)),
			c.do(t, "POST", b.base+"/v1/jobs/"+id+":approve", globex, []byte(`{"approve": true}`)),
			c.do(t, "GET", b.base+"/v1/jobs/"+id+":watch", globex, nil),
		} {
			p := requireProblem(t, r, http.StatusNotFound, "")
			require.Equal(t, "NOT_FOUND", p["code"])
		}
		list := c.do(t, "GET", b.base+"/v1/jobs", globex, nil)
		require.Equal(t, http.StatusOK, list.status)
		require.Empty(t, decode(t, list)["jobs"])

		noKey := c.do(t, "GET", b.base+"/v1/jobs/"+id, nil, nil)
		requireProblem(t, noKey, http.StatusUnauthorized, "")
		require.Equal(t, `Bearer realm="oncejob"`, noKey.header.Get("WWW-Authenticate"))
		badKey := c.do(t, "GET", b.base+"/v1/jobs/"+id, map[string]string{"Authorization": bearer("not-a-key")}, nil)
		requireProblem(t, badKey, http.StatusUnauthorized, "")
	})
}

// A body over the limit is refused with 413 before anything reaches the
// server: no job, and the key stays free.
func TestOversizedBodyIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	const limit = 4096
	b := setup(t, setupOpts{maxBodyBytes: limit})
	forEachClient(t, func(t *testing.T, c httpClient) {
		key := uuid.NewString()
		header := map[string]string{"Authorization": bearer(keyAcme), "Idempotency-Key": key, "Content-Type": "application/json"}
		big := []byte(`{"pipeline": "summarize", "document": {"text": "` + strings.Repeat("x", 2*limit) + `"}}`)

		r := c.do(t, "POST", b.base+"/v1/jobs", header, big)
		p := requireProblem(t, r, http.StatusRequestEntityTooLarge, "REQUEST_BODY_TOO_LARGE")
		require.Equal(t, "4096", p["metadata"].(map[string]any)["limit_bytes"])

		chunked := map[string]string{"Transfer-Encoding": "chunked"}
		for k, v := range header {
			chunked[k] = v
		}
		r = c.do(t, "POST", b.base+"/v1/jobs", chunked, big)
		requireProblem(t, r, http.StatusRequestEntityTooLarge, "REQUEST_BODY_TOO_LARGE")

		list := c.do(t, "GET", b.base+"/v1/jobs", header, nil)
		require.Equal(t, http.StatusOK, list.status)
		jobs, _ := decode(t, list)["jobs"].([]any)
		for _, j := range jobs {
			require.NotEqual(t, key, j.(map[string]any)["idempotency_key"], "nothing was written")
		}
		ok := c.do(t, "POST", b.base+"/v1/jobs", header, []byte(submitBody))
		require.Equal(t, http.StatusOK, ok.status, "the key was not consumed: %s", ok.body)
		require.Equal(t, "SUBMIT_OUTCOME_CREATED", decode(t, ok)["outcome"])
	})
}

// The operator routes answer as their RPCs do: a request the job's status
// refuses is 409 with the reason; a missing key where one is required 400.
func TestOperatorRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	forEachClient(t, func(t *testing.T, c httpClient) {
		created := c.do(t, "POST", b.base+"/v1/jobs", map[string]string{
			"Authorization": bearer(keyAcme), "Idempotency-Key": uuid.NewString(),
		}, []byte(submitBody))
		id := decode(t, created)["job"].(map[string]any)["id"].(string)
		key := map[string]string{"Authorization": bearer(keyAcme), "Idempotency-Key": uuid.NewString()}

		r := c.do(t, "POST", b.base+"/v1/jobs/"+id+":replay", key, []byte(`{"reason": "try again"}`))
		p := requireProblem(t, r, http.StatusConflict, "JOB_STATUS_CONFLICT")
		require.Equal(t, "FAILED_PRECONDITION", p["code"])
		require.Equal(t, "JOB_STATUS_QUEUED", p["metadata"].(map[string]any)["status"])

		r = c.do(t, "POST", b.base+"/v1/jobs/"+id+":approve", map[string]string{"Authorization": bearer(keyAcme)}, []byte(`{"approve": true}`))
		requireProblem(t, r, http.StatusBadRequest, "IDEMPOTENCY_KEY_INVALID")

		r = c.do(t, "POST", b.base+"/v1/jobs/"+id+":cancel", key, []byte(`{"reason": "wrong invoice"}`))
		require.Equal(t, http.StatusOK, r.status, "body %s", r.body)
		require.Equal(t, "JOB_STATUS_CANCELLED", decode(t, r)["job"].(map[string]any)["status"])
		r = c.do(t, "POST", b.base+"/v1/jobs/"+id+":cancel", key, []byte(`{"reason": "wrong invoice"}`))
		require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))

		r = c.do(t, "POST", b.base+"/v1/jobs/"+id+":resolve", key, []byte(`{"resolution": "RESOLUTION_SOMETIMES"}`))
		requireProblem(t, r, http.StatusBadRequest, "")

		full := c.do(t, "GET", b.base+"/v1/jobs/"+id+"?view=JOB_VIEW_FULL", key, nil)
		require.Equal(t, http.StatusOK, full.status, "body %s", full.body)
		count := c.do(t, "GET", b.base+"/v1/jobs:count", key, nil)
		require.Equal(t, http.StatusOK, count.status, "body %s", count.body)
		require.NotEmpty(t, decode(t, count)["counts"])

		r = c.do(t, "GET", b.base+"/v1/jobs/not-a-uuid", key, nil)
		p = requireProblem(t, r, http.StatusBadRequest, "")
		require.Equal(t, "job_id", p["field_violations"].([]any)[0].(map[string]any)["field"])
		r = c.do(t, "POST", b.base+"/v1/jobs", map[string]string{"Authorization": bearer(keyAcme), "Idempotency-Key": uuid.NewString()}, []byte(`{"pipeline": "summarize", "documnet": {}}`))
		requireProblem(t, r, http.StatusBadRequest, "")
		r = c.do(t, "GET", b.base+"/v2/nothing", key, nil)
		requireProblem(t, r, http.StatusNotFound, "NO_ROUTE")

		// DeliveryService: the job's deliveries (none: no sink), a retry of
		// a delivery that does not exist.
		r = c.do(t, "GET", b.base+"/v1/deliveries?job_id="+id+"&include_attempts=true", key, nil)
		require.Equal(t, http.StatusOK, r.status, "body %s", r.body)
		require.Nil(t, decode(t, r)["deliveries"])
		r = c.do(t, "POST", b.base+"/v1/deliveries/987654:retry", key, []byte(`{}`))
		requireProblem(t, r, http.StatusNotFound, "")
	})
}

// A store outage is 503 with Retry-After, and the reason a client can act
// on: retry with the same key.
func TestStoreOutageIs503WithRetryAfter(t *testing.T) {
	t.Parallel()
	st, err := storesqlite.Open(t.Context(), storesqlite.Config{DataDir: t.TempDir()})
	require.NoError(t, err)
	b := setup(t, setupOpts{store: st})
	st.Close()
	r := goClient{}.do(t, "POST", b.base+"/v1/jobs", map[string]string{"Authorization": bearer(keyAcme), "Idempotency-Key": "k"}, []byte(submitBody))
	p := requireProblem(t, r, http.StatusServiceUnavailable, "STORE_UNAVAILABLE")
	require.Equal(t, "1", r.header.Get("Retry-After"))
	require.EqualValues(t, 1, p["retry_after_seconds"])
	require.Equal(t, "UNAVAILABLE", p["code"])
}

// A body must be JSON: the media types a cross-site form can send without
// a preflight are refused with 415 before anything is read into a request.
func TestBodiesMustBeJSON(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	forEachClient(t, func(t *testing.T, c httpClient) {
		key := uuid.NewString()
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml"} {
			r := c.do(t, "POST", b.base+"/v1/jobs", map[string]string{
				"Authorization": bearer(keyAcme), "Idempotency-Key": key, "Content-Type": ct,
			}, []byte(submitBody))
			requireProblem(t, r, http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE")
		}
		ok := c.do(t, "POST", b.base+"/v1/jobs", map[string]string{
			"Authorization": bearer(keyAcme), "Idempotency-Key": key, "Content-Type": "application/json; charset=utf-8",
		}, []byte(submitBody))
		require.Equal(t, http.StatusOK, ok.status, "body %s", ok.body)
		require.Equal(t, "SUBMIT_OUTCOME_CREATED", decode(t, ok)["outcome"], "nothing was written before")
	})
}

// A batch over HTTP answers each item on its own, as over gRPC: one
// created, one a replay of a key used before, one invalid.
func TestSubmitJobsOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	forEachClient(t, func(t *testing.T, c httpClient) {
		auth := map[string]string{"Authorization": bearer(keyAcme)}
		used := "batch-used-" + uuid.NewString()
		first := c.do(t, "POST", b.base+"/v1/jobs", map[string]string{"Authorization": bearer(keyAcme), "Idempotency-Key": used}, []byte(submitBody))
		require.Equal(t, http.StatusOK, first.status, "body %s", first.body)
		body := `{"items": [
			{"idempotency_key": "batch-new-` + uuid.NewString() + `", "request": {"pipeline": "summarize", "document": {"text": "batch item"}}},
			{"idempotency_key": "` + used + `", "request": ` + submitBody + `},
			{"idempotency_key": "batch-bad-` + uuid.NewString() + `", "request": {"pipeline": "nope", "document": {"text": "x"}}}
		]}`
		r := c.do(t, "POST", b.base+"/v1/jobs:batchSubmit", auth, []byte(body))
		require.Equal(t, http.StatusOK, r.status, "body %s", r.body)
		results := decode(t, r)["results"].([]any)
		require.Len(t, results, 3)
		require.Equal(t, "SUBMIT_OUTCOME_CREATED", results[0].(map[string]any)["outcome"])
		require.Equal(t, "SUBMIT_OUTCOME_EXISTING", results[1].(map[string]any)["outcome"])
		require.Equal(t, decode(t, first)["job"].(map[string]any)["id"], results[1].(map[string]any)["job"].(map[string]any)["id"])
		require.NotNil(t, results[2].(map[string]any)["error"])
	})
}

// TestHTTP2RequestWithoutBody: over HTTP/2 (as a TLS listener serves it) a
// GET carries no body, and is not refused for not being JSON.
func TestHTTP2RequestWithoutBody(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	h2 := httptest.NewUnstartedServer(b.handler)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	t.Cleanup(h2.Close)
	req, err := http.NewRequest(http.MethodGet, h2.URL+"/v1/jobs", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", bearer(keyAcme))
	resp, err := h2.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, 2, resp.ProtoMajor)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
}
