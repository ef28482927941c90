package gateway_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBadInputOverHTTPIs400: a NUL in a document's text or in its bytes, in
// a reason or a filter, and a page token whose id is no UUID, are 400
// naming the field, with no Retry-After, on both stores — never 503, which
// the console and the SDKs retry (issue 20, findings 2 and 3).
func TestBadInputOverHTTPIs400(t *testing.T) {
	t.Parallel()
	forEachStore(t, setupOpts{}, func(t *testing.T, b *testBundle) {
		c := goClient{}
		auth := map[string]string{"Authorization": bearer(keyAcme)}
		keyed := func(key string) map[string]string {
			return map[string]string{"Authorization": bearer(keyAcme), "Idempotency-Key": key}
		}
		created := c.do(t, http.MethodPost, b.base+"/v1/jobs", keyed("ok"), []byte(submitBody))
		require.Equal(t, http.StatusOK, created.status, "body %s", created.body)
		id := decode(t, created)["job"].(map[string]any)["id"].(string)
		token := base64.RawURLEncoding.EncodeToString([]byte(`{"t":1700000000000000,"id":"not-a-uuid"}`))
		nulData := base64.StdEncoding.EncodeToString([]byte("Invoice\x0042"))

		for _, tc := range []struct {
			name, method, path, body, field string
			header                          map[string]string
		}{
			{"document text", http.MethodPost, "/v1/jobs", `{"pipeline": "summarize", "document": {"text": "Invoice\u000042"}}`, "document.text", keyed("t")},
			{"document bytes", http.MethodPost, "/v1/jobs", `{"pipeline": "summarize", "document": {"data": "` + nulData + `", "media_type": "text/plain"}}`, "document.data", keyed("d")},
			{"cancel reason", http.MethodPost, "/v1/jobs/" + id + ":cancel", `{"reason": "why\u0000"}`, "reason", keyed("c")},
			{"run name", http.MethodPost, "/v1/runs", `{"name": "nightly\u0000"}`, "name", keyed("r")},
			{"pipeline filter", http.MethodGet, "/v1/jobs?pipeline=" + url.QueryEscape("summ\x00"), "", "pipeline", auth},
			{"page token", http.MethodGet, "/v1/jobs?page_token=" + token, "", "page_token", auth},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var body []byte
				if tc.body != "" {
					body = []byte(tc.body)
				}
				r := c.do(t, tc.method, b.base+tc.path, tc.header, body)
				requireProblem(t, r, http.StatusBadRequest, "")
				require.Empty(t, r.header.Get("Retry-After"))
				require.Contains(t, string(r.body), `"field":"`+tc.field+`"`, "names the field")
			})
		}
		list := c.do(t, http.MethodGet, b.base+"/v1/jobs", auth, nil)
		require.Len(t, decode(t, list)["jobs"], 1, "nothing else written")
	})
}

// TestBodyErrorsInTheCallersWords: a body cut short, one that is not JSON,
// JSON after JSON, a field of the wrong type and an unknown field are 400
// saying where and what, in words - never a decoder's "unexpected EOF" or
// "proto: (line 1:14)" (issue 30, finding 8) - and nothing is written.
func TestBodyErrorsInTheCallersWords(t *testing.T) {
	t.Parallel()
	forEachStore(t, setupOpts{}, func(t *testing.T, b *testBundle) {
		c := goClient{}
		for i, tc := range []struct{ body, want string }{
			{`{"pipeline": "summarize", "document": {"text": "x"`, "the request body ends before its JSON value does (after 50 bytes): is it cut short"},
			{`{"pipeline": "summarize",}`, "the request body is not JSON: invalid character '}' looking for beginning of object key string at line 1, column 26"},
			{"{\n \"pipeline\": summarize\n}", "the request body is not JSON: invalid character 's' looking for beginning of value at line 2, column 14"},
			{`{"pipeline": "summarize"} {}`, "the request body holds more than one JSON value: more follows at line 1, column 27"},
			{`{"pipeline": 5}`, "the request body, at line 1, column 14: invalid value for string field pipeline: 5"},
			{`{"pipeline": "summarize", "documents": {}}`, `the request body, at line 1, column 27: unknown field "documents"`},
		} {
			r := c.do(t, http.MethodPost, b.base+"/v1/jobs", map[string]string{"Authorization": bearer(keyAcme), "Idempotency-Key": "b" + strconv.Itoa(i)}, []byte(tc.body))
			requireProblem(t, r, http.StatusBadRequest, "")
			p := decode(t, r)
			require.True(t, strings.HasPrefix(p["detail"].(string), tc.want), "%s: %s", tc.body, p["detail"])
			require.Contains(t, string(r.body), `"field":"body"`, tc.body)
			require.NotContains(t, string(r.body), "unexpected EOF", tc.body)
			require.NotContains(t, string(r.body), "proto:", tc.body)
		}
		list := c.do(t, http.MethodGet, b.base+"/v1/jobs", map[string]string{"Authorization": bearer(keyAcme)}, nil)
		require.Empty(t, decode(t, list)["jobs"], "nothing written")
	})
}
