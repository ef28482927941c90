package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// serveWithKey starts the real binary with one API key (tenant acme) and
// the extra flags, and returns its HTTP address and the key.
func serveWithKey(t *testing.T, extra ...string) (httpAddr, key string) {
	t.Helper()
	key = "bodies-test-key"
	keys := writeFile(t, "keys.yaml", fmt.Sprintf("keys:\n  - tenant: acme\n    sha256: %s\n", tenant.HashKey(key)))
	addr, httpAddr := freeAddr(t), freeAddr(t)
	args := append([]string{"serve", "--database-url", storepgtest.NewSchemaURL(t), "--migrate", "--grpc-addr", addr, "--http-addr", httpAddr, "--api-keys", keys}, extra...)
	p := start(t, "serve-bodies", nil, args...)
	t.Cleanup(p.stop)
	waitHealthy(t, p, addr)
	return httpAddr, key
}

// rawRequest opens a connection to addr and sends head (request line and
// headers, without the blank line) and then body; it returns a reader of
// the response. The connection gives up after 30 s, so a server that
// never answers fails the test instead of hanging it.
func rawRequest(t *testing.T, addr, head, body string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = io.WriteString(conn, strings.ReplaceAll(head, "\n", "\r\n")+"\r\n\r\n"+body)
	require.NoError(t, err)
	return conn, bufio.NewReader(conn)
}

// TestHTTPBodiesAfterAuthentication (issue #31, finding 7): a POST that
// announces a 16 MB body and sends none of it is answered 401 at once when
// it has no key (or a wrong one): the body is never waited for. Before,
// the gateway read the whole body first (here: waited for it forever).
func TestHTTPBodiesAfterAuthentication(t *testing.T) {
	t.Parallel()
	httpAddr, _ := serveWithKey(t)
	for _, auth := range []string{"", "\nAuthorization: Bearer not-a-key"} {
		_, r := rawRequest(t, httpAddr, "POST /v1/jobs HTTP/1.1\nHost: "+httpAddr+"\nContent-Type: application/json\nIdempotency-Key: k1\nContent-Length: 16000000"+auth, "")
		began := time.Now()
		resp, err := http.ReadResponse(r, nil)
		t.Logf("answered in %s", time.Since(began))
		require.NoError(t, err, "answered without the body")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		resp.Body.Close()
	}
	// The Connect face too (its translation reads a body whole before the
	// gRPC server sees the call): 401 with Connect's JSON error.
	_, r := rawRequest(t, httpAddr, "POST /oncejob.v1.JobService/SubmitJob HTTP/1.1\nHost: "+httpAddr+"\nContent-Type: application/json\nContent-Length: 16000000", "")
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err, "answered without the body")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), `"code":"unauthenticated"`)
}

// TestHTTPSlowBodiesAreCut (issue #31, finding 10): a request whose body
// trickles (here: 10 of 1,000 bytes, then nothing) is cut once
// --request-read-timeout has passed: answered or its connection closed,
// never held. Before, it was held for as long as the client liked. A
// watch (SSE) outlives the timeout: the deadline is lifted once a
// request's body is in.
func TestHTTPSlowBodiesAreCut(t *testing.T) {
	t.Parallel()
	httpAddr, key := serveWithKey(t, "--request-read-timeout", "1s", "--http-read-header-timeout", "1s")
	conn, r := rawRequest(t, httpAddr, "POST /v1/jobs HTTP/1.1\nHost: "+httpAddr+"\nContent-Type: application/json\nIdempotency-Key: k1\nAuthorization: Bearer "+key+"\nContent-Length: 1000", `{"pipeline":`)
	resp, err := http.ReadResponse(r, nil)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		t.Logf("answered %d: %s", resp.StatusCode, b)
		require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "a body that never came is not served")
		_, err = r.ReadByte()
	}
	require.Error(t, err, "the connection is closed")
	require.NotContains(t, err.Error(), "timeout", "closed by the server, not by the test's own deadline")
	_ = conn.Close()

	// A watch lasts past the request timeout.
	_, sse := rawRequest(t, httpAddr, "GET /v1/jobs:watch HTTP/1.1\nHost: "+httpAddr+"\nAccept: text/event-stream\nAuthorization: Bearer "+key, "")
	resp, err = http.ReadResponse(sse, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	time.Sleep(2 * time.Second) // a pause past the timeout, not a wait for something
	req, err := http.NewRequest("POST", "http://"+httpAddr+"/v1/jobs", strings.NewReader(`{"pipeline": "summarize", "document": {"text": "watched past the read timeout"}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Idempotency-Key", "after-timeout")
	posted, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	posted.Body.Close()
	require.Equal(t, http.StatusOK, posted.StatusCode)
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err, "the watch was cut")
		if strings.HasPrefix(line, "data:") {
			return // an event after the timeout: the watch lives on
		}
	}
}
