package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/web"
)

func get(t *testing.T, h http.Handler, method, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	resp := rec.Result()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

func TestConsoleIsServedWithAPolicyThatForbidsInlineScript(t *testing.T) {
	t.Parallel()
	h := web.Handler()

	resp, body := get(t, h, "GET", "/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	csp := resp.Header.Get("Content-Security-Policy")
	require.Contains(t, csp, "script-src 'self';")
	require.NotContains(t, csp, "unsafe-inline")
	require.NotContains(t, csp, "unsafe-eval")
	require.Contains(t, csp, "frame-ancestors 'none'")
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	require.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"))
	// Every script is a file of this origin: none inline.
	require.Equal(t, 1, strings.Count(body, "<script"))
	require.Contains(t, body, `<script type="module" src="/assets/app.js"></script>`)
	require.NotRegexp(t, `\son[a-z]+\s*=`, body, "no inline event handler attributes")

	for path, ctype := range map[string]string{
		"/assets/app.js": "text/javascript; charset=utf-8", "/assets/api.js": "text/javascript; charset=utf-8",
		"/assets/style.css": "text/css; charset=utf-8",
	} {
		resp, body := get(t, h, "GET", path)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Equal(t, ctype, resp.Header.Get("Content-Type"), path)
		require.NotEmpty(t, body)
		require.NotEmpty(t, resp.Header.Get("Content-Security-Policy"))
	}
	for _, path := range []string{"/nope", "/assets/", "/assets/../web.go", "/index.html/x", "/assets/missing.js"} {
		resp, _ := get(t, h, "GET", path)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
	resp, _ = get(t, h, "POST", "/")
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// The console builds the page with DOM text nodes, never HTML strings: no
// script may assign markup.
func TestConsoleScriptsNeverAssignHTML(t *testing.T) {
	t.Parallel()
	h := web.Handler()
	for _, name := range []string{"api.js", "app.js", "dom.js", "fmt.js", "job.js", "jobs.js", "live.js", "queues.js"} {
		_, body := get(t, h, "GET", "/assets/"+name)
		require.NotEmpty(t, body, name)
		for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
			require.NotContains(t, body, sink, "%s uses %s", name, sink)
		}
	}
}
