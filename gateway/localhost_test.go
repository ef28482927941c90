package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/gateway"
)

func TestLocalHostsOnly(t *testing.T) {
	t.Parallel()
	h := gateway.LocalHostsOnly(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for host, want := range map[string]int{
		"127.0.0.1:7071": http.StatusNoContent, "localhost:7071": http.StatusNoContent, "LOCALHOST": http.StatusNoContent,
		"[::1]:7071": http.StatusNoContent, "10.1.2.3": http.StatusNoContent,
		"evil.example:7071": http.StatusMisdirectedRequest, "localhost.evil.example": http.StatusMisdirectedRequest,
	} {
		req := httptest.NewRequest("GET", "/v1/jobs", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, want, rec.Code, host)
	}
}
