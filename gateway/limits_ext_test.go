package gateway_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/server/limits"
)

// A tenant over its submit rate gets 429 with Retry-After and the limit's
// reason; another tenant on the same server is let through.
func TestSubmitOverTheTenantRateIs429WithRetryAfter(t *testing.T) {
	t.Parallel()
	slow := 0.01 // one submission every 100s: the second of a burst of 1 waits ~100s
	lim, err := limits.New(limits.Config{Section: &limits.Section{Tenants: map[string]limits.Override{
		"acme": {SubmitRate: &slow},
	}}})
	require.NoError(t, err)
	b := setup(t, setupOpts{limits: lim})
	submit := func(key string) response {
		return goClient{}.do(t, "POST", b.base+"/v1/jobs", map[string]string{
			"Authorization": bearer(key), "Content-Type": "application/json", "Idempotency-Key": uuid.NewString(),
		}, []byte(submitBody))
	}

	first := submit(keyAcme)
	require.Equal(t, http.StatusOK, first.status, "body %s", first.body)
	over := submit(keyAcme)
	p := requireProblem(t, over, http.StatusTooManyRequests, limits.ReasonSubmitRate)
	require.Equal(t, "RESOURCE_EXHAUSTED", p["code"])
	retryAfter, err := strconv.Atoi(over.header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", over.header.Get("Retry-After"))
	require.Greater(t, retryAfter, 90, "the wait the bucket says, in whole seconds")
	require.LessOrEqual(t, retryAfter, 100)
	require.EqualValues(t, retryAfter, p["retry_after_seconds"])

	for range 3 {
		r := submit(keyGlobex)
		require.Equal(t, http.StatusOK, r.status, "another tenant is not limited: %s", r.body)
	}
}

// A submitter key on an operator route is 403 with ROLE_NOT_PERMITTED; the
// same tenant's operator key is let through.
func TestSubmitterOnAnOperatorRouteIs403(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	sub := goClient{}.do(t, "POST", b.base+"/v1/jobs", map[string]string{
		"Authorization": bearer(keyAcmeSubmitter), "Content-Type": "application/json", "Idempotency-Key": uuid.NewString(),
	}, []byte(submitBody))
	require.Equal(t, http.StatusOK, sub.status, "body %s", sub.body)
	id := decode(t, sub)["job"].(map[string]any)["id"].(string)

	cancel := func(key string) response {
		return goClient{}.do(t, "POST", b.base+"/v1/jobs/"+id+":cancel", map[string]string{
			"Authorization": bearer(key), "Content-Type": "application/json",
		}, []byte(`{"reason": "not needed"}`))
	}
	p := requireProblem(t, cancel(keyAcmeSubmitter), http.StatusForbidden, "ROLE_NOT_PERMITTED")
	require.Equal(t, "PERMISSION_DENIED", p["code"])
	require.Equal(t, "operator", p["metadata"].(map[string]any)["required_role"])
	r := cancel(keyAcme)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.body)
}
