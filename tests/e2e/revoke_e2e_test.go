package e2e

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/store/storesqlite"
)

// keysCmd runs `oncejob keys args...` on the database at url and returns
// its stdout, trimmed, and stderr.
func keysCmd(t *testing.T, url string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "oncejob"), append([]string{"keys"}, args...)...)
	cmd.Env = append(os.Environ(), "ONCEJOB_DATABASE_URL="+url)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "keys %v: %s", args, stderr.String())
	return strings.TrimSpace(stdout.String()), stderr.String()
}

// streamEnd is how and when an open stream ended.
type streamEnd struct {
	name string
	at   time.Time
	err  error  // gRPC: the stream's status
	sse  string // SSE: the last event's type and data
}

// A key revoked while streams are open on two replicas of one Postgres:
// its gRPC WatchJobs and SSE watches, which delivered a new job's change
// before, all end within twice the key cache TTL of the revocation —
// gRPC with UNAUTHENTICATED (ErrorInfo API_KEY_REVOKED), SSE with a
// `problem` event saying so, then the end of the response. Another key's
// stream on the same replicas stays open.
func TestRevokedKeyEndsOpenStreamsOnTwoReplicas(t *testing.T) {
	t.Parallel()
	const cacheTTL = time.Second // serve's default --key-cache-ttl
	url := storepgtest.NewMigratedSchemaURL(t)
	_, errOut, code := cli{t: t}.run("", "migrate", "--database-url", url)
	require.Zero(t, code, errOut)
	revokedKey, _ := keysCmd(t, url, "create", "--tenant", "acme", "--role", "submitter")
	m := storeKeyRE.FindStringSubmatch(revokedKey)
	require.NotNil(t, m, revokedKey)
	otherKey, _ := keysCmd(t, url, "create", "--tenant", "acme", "--role", "submitter")

	type api struct{ grpcAddr, httpAddr string }
	var apis []api
	for i := range 2 {
		a := api{freeAddr(t), freeAddr(t)}
		p := start(t, "serve-revoke-"+string(rune('a'+i)), nil, "serve", "--database-url", url,
			"--grpc-addr", a.grpcAddr, "--http-addr", a.httpAddr, "--workers", "0", "--key-cache-ttl", cacheTTL.String())
		t.Cleanup(p.stop)
		waitHealthy(t, p, a.grpcAddr)
		apis = append(apis, a)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bearer := func(key string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
	}
	type grpcWatch struct {
		name   string
		stream oncejobv1.JobService_WatchJobsClient
	}
	type sseWatch struct {
		name string
		body *bufio.Reader
	}
	var grpcs []grpcWatch
	var sses []sseWatch
	var other oncejobv1.JobService_WatchJobsClient
	for i, a := range apis {
		jobs := dialJobs(t, a.grpcAddr)
		s, err := jobs.WatchJobs(bearer(revokedKey), &oncejobv1.WatchJobsRequest{})
		require.NoError(t, err)
		_, err = s.Header() // the watch is established
		require.NoError(t, err)
		grpcs = append(grpcs, grpcWatch{"grpc@" + string(rune('a'+i)), s})
		if i == 1 {
			other, err = jobs.WatchJobs(bearer(otherKey), &oncejobv1.WatchJobsRequest{})
			require.NoError(t, err)
			_, err = other.Header()
			require.NoError(t, err)
		}

		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+a.httpAddr+"/v1/jobs:watch", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+revokedKey)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		require.Equal(t, http.StatusOK, resp.StatusCode)
		sses = append(sses, sseWatch{"sse@" + string(rune('a'+i)), bufio.NewReader(resp.Body)})
	}

	// The streams are live: a new job's change reaches each of them.
	sub, err := dialJobs(t, apis[0].grpcAddr).SubmitJob(metadata.AppendToOutgoingContext(bearer(otherKey), "idempotency-key", "revoke-1"),
		&oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "an invoice"}}})
	require.NoError(t, err)
	for _, g := range grpcs {
		resp, err := g.stream.Recv()
		require.NoError(t, err, g.name)
		require.Equal(t, sub.GetJob().GetId(), resp.GetJob().GetId(), g.name)
	}
	for _, s := range sses {
		typ, data := readSSEEvent(t, s.body)
		require.Empty(t, typ, s.name)
		require.Contains(t, data, sub.GetJob().GetId(), s.name)
	}

	ends := make(chan streamEnd, len(grpcs)+len(sses))
	for _, g := range grpcs {
		go func() {
			for {
				if _, err := g.stream.Recv(); err != nil {
					ends <- streamEnd{name: g.name, at: time.Now(), err: err}
					return
				}
			}
		}()
	}
	for _, s := range sses {
		go func() {
			var last string
			for {
				typ, data, err := nextSSEEvent(s.body)
				if err != nil {
					ends <- streamEnd{name: s.name, at: time.Now(), sse: last, err: err}
					return
				}
				last = typ + " " + data
			}
		}()
	}

	out, _ := keysCmd(t, url, "revoke", "ojk_"+m[1])
	require.Contains(t, out, "revoked ojk_"+m[1])
	revokedAt := time.Now() // the revocation committed before the command printed

	for range len(grpcs) + len(sses) {
		var e streamEnd
		select {
		case e = <-ends:
		case <-ctx.Done():
			t.Fatal("a revoked key's stream is still open")
		}
		took := e.at.Sub(revokedAt)
		t.Logf("%s ended %s after the revocation", e.name, took.Round(time.Millisecond))
		if strings.HasPrefix(e.name, "grpc") {
			st := status.Convert(e.err)
			require.Equal(t, codes.Unauthenticated, st.Code(), "%s: %v", e.name, e.err)
			var reason string
			for _, d := range st.Details() {
				if info, ok := d.(*errdetails.ErrorInfo); ok {
					reason = info.GetReason()
				}
			}
			require.Equal(t, "API_KEY_REVOKED", reason, e.name)
		} else {
			require.True(t, errors.Is(e.err, io.EOF), "%s: the response ends: %v", e.name, e.err)
			require.True(t, strings.HasPrefix(e.sse, "problem "), "%s: a problem event last: %q", e.name, e.sse)
			require.Contains(t, e.sse, "UNAUTHENTICATED", e.name)
			require.Contains(t, e.sse, "API_KEY_REVOKED", e.name)
		}
	}

	// Another key's stream goes on: a second job reaches it.
	sub2, err := dialJobs(t, apis[1].grpcAddr).SubmitJob(metadata.AppendToOutgoingContext(bearer(otherKey), "idempotency-key", "revoke-2"),
		&oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "another"}}})
	require.NoError(t, err)
	for {
		resp, err := other.Recv()
		require.NoError(t, err, "the other key's stream stays open")
		if resp.GetJob().GetId() == sub2.GetJob().GetId() {
			break
		}
	}
}

// nextSSEEvent reads the next Server-Sent Event that carries data: its
// type ("" for a message) and data. Comments and a bare retry are skipped.
func nextSSEEvent(r *bufio.Reader) (typ, data string, err error) {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", "", err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if data != "" {
				return typ, data, nil
			}
			typ = ""
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		}
	}
}

func readSSEEvent(t *testing.T, r *bufio.Reader) (typ, data string) {
	t.Helper()
	typ, data, err := nextSSEEvent(r)
	require.NoError(t, err)
	return typ, data
}

// `oncejob keys create|list|revoke` with no database URL and no embedded
// store where --data-dir points (its default, ./oncejob-data, or one named)
// exits 1 naming --database-url and the directory, and creates nothing:
// before, it made an empty store there and answered "no key". On a data
// directory that holds a store, keys work as before.
func TestKeysRefuseAStoreThatDoesNotExist(t *testing.T) {
	t.Parallel()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ONCEJOB_DATABASE_URL=") && !strings.HasPrefix(kv, "ONCEJOB_DATA_DIR=") {
			env = append(env, kv)
		}
	}
	run := func(dir string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(filepath.Join(binDir, "oncejob"), append([]string{"keys"}, args...)...)
		cmd.Env, cmd.Dir = env, dir
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			require.NoError(t, err)
		}
		return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
	}
	cwd := t.TempDir()
	named := filepath.Join(t.TempDir(), "data")
	for _, args := range [][]string{
		{"revoke", "ojk_aaaaaaaaaaaa"},
		{"list"},
		{"create", "--tenant", "acme"},
		{"revoke", "--data-dir", named, "ojk_aaaaaaaaaaaa"},
		{"create", "--tenant", "acme", "--data-dir", named},
	} {
		out, errOut, code := run(cwd, args...)
		require.Equal(t, 1, code, "keys %v: %s%s", args, out, errOut)
		require.Empty(t, out, "keys %v printed no key", args)
		require.Contains(t, errOut, "--database-url", args)
		require.Contains(t, errOut, "no embedded store in", args)
		entries, err := os.ReadDir(cwd)
		require.NoError(t, err)
		require.Empty(t, entries, "keys %v created nothing in the working directory", args)
		require.NoDirExists(t, named, "keys %v created no data directory", args)
	}

	// A store serve made (opened and closed here, as serve would).
	require.NoError(t, os.MkdirAll(named, 0o700))
	st, err := storesqlite.Open(context.Background(), storesqlite.Config{DataDir: named})
	require.NoError(t, err)
	st.Close()
	key, errOut, code := run(cwd, "create", "--tenant", "acme", "--data-dir", named)
	require.Zero(t, code, errOut)
	m := storeKeyRE.FindStringSubmatch(strings.TrimSpace(key))
	require.NotNil(t, m, key)
	out, errOut, code := run(cwd, "revoke", "--data-dir", named, "ojk_"+m[1])
	require.Zero(t, code, errOut)
	require.Contains(t, out, "revoked ojk_"+m[1])
}
