package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// response is what the tests look at of an HTTP response.
type response struct {
	status int
	header http.Header
	body   []byte
}

// httpClient sends one request. The tests run every scenario with two: Go's
// net/http and the curl command line, so the API is what any HTTP client
// sees, not what Go's client makes of it.
type httpClient interface {
	name() string
	do(t *testing.T, method, url string, header map[string]string, body []byte) response
}

// withJSON is header with Content-Type: application/json when it sets none.
func withJSON(header map[string]string) map[string]string {
	h := map[string]string{"Content-Type": "application/json"}
	for k, v := range header {
		h[k] = v
	}
	return h
}

// forEachClient runs fn once with net/http and once with curl.
func forEachClient(t *testing.T, fn func(t *testing.T, c httpClient)) {
	t.Run("net-http", func(t *testing.T) { fn(t, goClient{}) })
	t.Run("curl", func(t *testing.T) { fn(t, newCurl(t)) })
}

type goClient struct{}

func (goClient) name() string { return "net/http" }

func (goClient) do(t *testing.T, method, url string, header map[string]string, body []byte) response {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, r)
	require.NoError(t, err)
	if body != nil {
		header = withJSON(header)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if header["Transfer-Encoding"] == "chunked" {
		req.ContentLength = -1 // net/http sends a body of unknown length chunked
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.Header.Del("Transfer-Encoding")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

type curl struct{ path string }

// newCurl finds curl, or skips (fails under CI=true) with how to install it.
func newCurl(t *testing.T) curl {
	t.Helper()
	path, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is required under CI=true (apt-get install -y curl)")
		}
		t.Skip("SKIP: curl not found; install it with: apt-get install -y curl")
	}
	return curl{path: path}
}

func (curl) name() string { return "curl" }

func (c curl) do(t *testing.T, method, url string, header map[string]string, body []byte) response {
	t.Helper()
	args := []string{"--silent", "--show-error", "--include", "--http1.1", "--max-time", "30",
		"--request", method, "--header", "Expect:"}
	if body != nil {
		header = withJSON(header)
		args = append(args, "--data-binary", "@-")
	}
	for k, v := range header {
		args = append(args, "--header", k+": "+v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.path, append(args, url)...)
	cmd.Stdin = bytes.NewReader(body)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "curl %s: %s", strings.Join(args, " "), stderr.String())
	return parseCurl(t, out)
}

// parseCurl splits curl --include output into status, headers and body.
func parseCurl(t *testing.T, out []byte) response {
	t.Helper()
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(out)))
	statusLine, err := r.ReadLine()
	require.NoError(t, err)
	fields := strings.Fields(statusLine)
	require.GreaterOrEqual(t, len(fields), 2, "status line %q", statusLine)
	code, err := strconv.Atoi(fields[1])
	require.NoError(t, err)
	mime, err := r.ReadMIMEHeader()
	require.NoError(t, err)
	body, err := io.ReadAll(r.R)
	require.NoError(t, err)
	return response{status: code, header: http.Header(mime), body: body}
}
