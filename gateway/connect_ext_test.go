package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/oncejob/oncejob/gateway"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/server/idempotency"
	"github.com/oncejob/oncejob/server/limits"
	"github.com/oncejob/oncejob/server/membudget"
	"github.com/oncejob/oncejob/store/storesqlite/storesqlitetest"
)

// connectProtocols are the two protocols of browsers: Connect and gRPC-web.
var connectProtocols = []struct {
	name string
	opts []connect.ClientOption
}{
	{"connect", nil},
	{"connect-json", []connect.ClientOption{connect.WithProtoJSON()}},
	{"grpc-web", []connect.ClientOption{connect.WithGRPCWeb()}},
}

func connectClient[Req, Res any](b *testBundle, method string, opts []connect.ClientOption) *connect.Client[Req, Res] {
	return connect.NewClient[Req, Res](http.DefaultClient, b.base+method, opts...)
}

func connectRequest[T any](msg *T, key string, headers map[string]string) *connect.Request[T] {
	req := connect.NewRequest(msg)
	req.Header().Set("Authorization", bearer(key))
	for k, v := range headers {
		req.Header().Set(k, v)
	}
	return req
}

// connectReason is the ErrorInfo reason of a Connect error, "" if none.
func connectReason(t *testing.T, err error) string {
	t.Helper()
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	for _, d := range ce.Details() {
		v, derr := d.Value()
		require.NoError(t, derr)
		if info, ok := v.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// The Connect protocol and gRPC-web reach the gRPC server's chain: the
// idempotency key in a header (a replay answered with the same job and
// Idempotent-Replayed, another request under the key refused with
// IDEMPOTENCY_KEY_REUSED, no key with IDEMPOTENCY_KEY_INVALID), API keys
// and roles (no key, a submitter's key on an operator RPC, another
// tenant's job), and validation's BadRequest.
func TestConnectRunsTheInterceptorChain(t *testing.T) {
	t.Parallel()
	forEachStore(t, setupOpts{}, func(t *testing.T, b *testBundle) {
		for _, p := range connectProtocols {
			t.Run(p.name, func(t *testing.T) {
				ctx := context.Background()
				submit := connectClient[oncejobv1.SubmitJobRequest, oncejobv1.SubmitJobResponse](b, "/oncejob.v1.JobService/SubmitJob", p.opts)
				get := connectClient[oncejobv1.GetJobRequest, oncejobv1.GetJobResponse](b, "/oncejob.v1.JobService/GetJob", p.opts)
				cancel := connectClient[oncejobv1.CancelJobRequest, oncejobv1.CancelJobResponse](b, "/oncejob.v1.JobService/CancelJob", p.opts)
				doc := func(text string) *oncejobv1.SubmitJobRequest {
					return &oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Name: "a.txt", Content: &oncejobv1.Document_Text{Text: text}}}
				}
				key := map[string]string{"Idempotency-Key": "connect-" + p.name + "-" + uuid.NewString()}

				first, err := submit.CallUnary(ctx, connectRequest(doc("Invoice 42"), keyAcme, key))
				require.NoError(t, err)
				require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED, first.Msg.GetOutcome())
				require.Empty(t, first.Header().Get("Idempotent-Replayed"))
				again, err := submit.CallUnary(ctx, connectRequest(doc("Invoice 42"), keyAcme, key))
				require.NoError(t, err)
				require.Equal(t, first.Msg.GetJob().GetId(), again.Msg.GetJob().GetId())
				require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING, again.Msg.GetOutcome())
				require.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))

				_, err = submit.CallUnary(ctx, connectRequest(doc("Invoice 43"), keyAcme, key))
				require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
				require.Equal(t, idempotency.ReasonKeyReused, connectReason(t, err))
				_, err = submit.CallUnary(ctx, connectRequest(doc("Invoice 44"), keyAcme, nil))
				require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
				require.Equal(t, idempotency.ReasonKeyInvalid, connectReason(t, err))

				_, err = submit.CallUnary(ctx, connect.NewRequest(doc("Invoice 45")))
				require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "no API key")
				_, err = cancel.CallUnary(ctx, connectRequest(&oncejobv1.CancelJobRequest{JobId: first.Msg.GetJob().GetId()}, keyAcmeSubmitter, nil))
				require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "a submitter cancels nothing")
				_, err = get.CallUnary(ctx, connectRequest(&oncejobv1.GetJobRequest{JobId: first.Msg.GetJob().GetId()}, keyGlobex, nil))
				require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "another tenant's job")
				got, err := get.CallUnary(ctx, connectRequest(&oncejobv1.GetJobRequest{JobId: first.Msg.GetJob().GetId()}, keyAcme, nil))
				require.NoError(t, err)
				require.Equal(t, first.Msg.GetJob().GetId(), got.Msg.GetJob().GetId())

				_, err = submit.CallUnary(ctx, connectRequest(&oncejobv1.SubmitJobRequest{Pipeline: "summarize"}, keyAcme, map[string]string{"Idempotency-Key": uuid.NewString()}))
				require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
				var ce *connect.Error
				require.ErrorAs(t, err, &ce)
				var fields []string
				for _, d := range ce.Details() {
					v, derr := d.Value()
					require.NoError(t, derr)
					if br, ok := v.(*errdetails.BadRequest); ok {
						for _, f := range br.GetFieldViolations() {
							fields = append(fields, f.GetField())
						}
					}
				}
				require.Contains(t, fields, "document", "the BadRequest names the field")
			})
		}
	})
}

// WatchJob over Connect and gRPC-web streams the job's events in seq order
// as the engine commits them, and ends after the terminal one.
func TestConnectWatchJobStreams(t *testing.T) {
	t.Parallel()
	forEachStore(t, setupOpts{}, func(t *testing.T, b *testBundle) {
		for _, p := range connectProtocols {
			t.Run(p.name, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				submit := connectClient[oncejobv1.SubmitJobRequest, oncejobv1.SubmitJobResponse](b, "/oncejob.v1.JobService/SubmitJob", p.opts)
				watchJob := connectClient[oncejobv1.WatchJobRequest, oncejobv1.WatchJobResponse](b, "/oncejob.v1.JobService/WatchJob", p.opts)
				res, err := submit.CallUnary(ctx, connectRequest(&oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "watch " + p.name + uuid.NewString()}}},
					keyAcme, map[string]string{"Idempotency-Key": uuid.NewString()}))
				require.NoError(t, err)
				jobID := res.Msg.GetJob().GetId()

				stream, err := watchJob.CallServerStream(ctx, connectRequest(&oncejobv1.WatchJobRequest{JobId: jobID}, keyAcme, nil))
				require.NoError(t, err)
				defer stream.Close()
				require.True(t, stream.Receive(), "%v", stream.Err())
				require.EqualValues(t, 1, stream.Msg().GetEvent().GetSeq())
				require.Equal(t, "true", stream.ResponseHeader().Get("Watch-Established"))

				seqs := make(chan int32)
				done := make(chan error, 1)
				go func() {
					for stream.Receive() {
						seqs <- stream.Msg().GetEvent().GetSeq()
					}
					close(seqs)
					done <- stream.Err()
				}()
				// Each step waits for the event before it, so the stream
				// delivers live events, not only a backlog.
				drive(t, b.store, 1, func(seq int) {
					if seq > 2 {
						require.EqualValues(t, seq-1, <-seqs)
					}
				})
				require.EqualValues(t, 7, <-seqs)
				_, open := <-seqs
				require.False(t, open, "the stream ends after the terminal event")
				require.NoError(t, <-done)

				other, err := watchJob.CallServerStream(ctx, connectRequest(&oncejobv1.WatchJobRequest{JobId: jobID}, keyGlobex, nil))
				require.NoError(t, err)
				require.False(t, other.Receive())
				require.Equal(t, connect.CodeNotFound, connect.CodeOf(other.Err()))
				require.NoError(t, other.Close())
			})
		}
	})
}

const allowedOrigin = "https://app.example.com"

// corsRequest sends method to path with origin and headers, and returns the
// response's status and headers.
func corsRequest(t *testing.T, b *testBundle, method, path, origin string, headers map[string]string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, b.base+path, strings.NewReader(`{"jobId": "nope"}`))
	require.NoError(t, err)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// CORS: an allowed origin's preflight is answered with what Connect needs
// and its calls can read the answer and the headers Connect reads; an
// origin not allowed gets no CORS header anywhere and its calls never
// reach the server; no origin at all (curl, SDKs) and the server's own
// origin pass.
func TestCORS(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{corsOrigins: []string{allowedOrigin + "/", "http://localhost:5173"}})
	const getJob = "/oncejob.v1.JobService/GetJob"
	preflight := map[string]string{
		"Access-Control-Request-Method":  "POST",
		"Access-Control-Request-Headers": "authorization, content-type, connect-protocol-version, idempotency-key",
	}
	call := map[string]string{"Content-Type": "application/json", "Authorization": bearer(keyAcme)}

	for _, path := range []string{getJob, "/oncejob.v1.RunService/GetRun", "/v1/jobs/nope"} {
		code, h := corsRequest(t, b, http.MethodOptions, path, allowedOrigin, preflight)
		require.Equal(t, http.StatusNoContent, code, path)
		require.Equal(t, allowedOrigin, h.Get("Access-Control-Allow-Origin"))
		require.Empty(t, h.Get("Access-Control-Allow-Credentials"))
		for _, name := range []string{"Authorization", "Idempotency-Key", "Connect-Protocol-Version", "X-Grpc-Web"} {
			require.Contains(t, h.Get("Access-Control-Allow-Headers"), name)
		}
		require.Contains(t, h.Values("Vary"), "Origin")

		for _, origin := range []string{"https://evil.example", "null", "https://app.example.com.evil.example", "http://app.example.com"} {
			code, h = corsRequest(t, b, http.MethodOptions, path, origin, preflight)
			require.Equal(t, http.StatusForbidden, code, "%s from %s", path, origin)
			require.Empty(t, h.Get("Access-Control-Allow-Origin"))
			require.Empty(t, h.Get("Access-Control-Allow-Headers"))
		}
	}
	code, _ := corsRequest(t, b, http.MethodOptions, getJob, allowedOrigin, map[string]string{
		"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, cookie-monster",
	})
	require.Equal(t, http.StatusForbidden, code, "a header the API does not take")

	code, h := corsRequest(t, b, http.MethodPost, getJob, allowedOrigin, call)
	require.Equal(t, http.StatusNotFound, code, "the call itself ran: the job is not found")
	require.Equal(t, allowedOrigin, h.Get("Access-Control-Allow-Origin"))
	for _, name := range []string{"Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin", "Idempotent-Replayed", "X-Request-Id"} {
		require.Contains(t, h.Get("Access-Control-Expose-Headers"), name)
	}
	code, h = corsRequest(t, b, http.MethodPost, getJob, "http://localhost:5173", call)
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, "http://localhost:5173", h.Get("Access-Control-Allow-Origin"))

	code, h = corsRequest(t, b, http.MethodPost, getJob, "https://evil.example", call)
	require.Equal(t, http.StatusForbidden, code, "never reaches the server")
	require.Empty(t, h.Get("Access-Control-Allow-Origin"))
	require.Empty(t, h.Get("Access-Control-Expose-Headers"))
	require.Empty(t, h.Get("Grpc-Status"))

	code, h = corsRequest(t, b, http.MethodPost, getJob, "", call)
	require.Equal(t, http.StatusNotFound, code, "no Origin: not a browser's cross-origin call")
	require.Empty(t, h.Get("Access-Control-Allow-Origin"))
	code, h = corsRequest(t, b, http.MethodPost, getJob, b.base, call)
	require.Equal(t, http.StatusNotFound, code, "the server's own origin (its console)")
	require.Empty(t, h.Get("Access-Control-Allow-Origin"))
}

// With no origin configured (the default) every other origin is refused.
func TestCORSOffByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{store: storesqlitetest.NewTestStore(t)})
	code, h := corsRequest(t, b, http.MethodOptions, "/oncejob.v1.JobService/SubmitJob", allowedOrigin, map[string]string{"Access-Control-Request-Method": "POST"})
	require.Equal(t, http.StatusForbidden, code)
	require.Empty(t, h.Get("Access-Control-Allow-Origin"))
	code, _ = corsRequest(t, b, http.MethodPost, "/v1/jobs/nope", allowedOrigin, map[string]string{"Authorization": bearer(keyAcme)})
	require.Equal(t, http.StatusForbidden, code)
}

func TestNewCORSRefusesWhatIsNoOrigin(t *testing.T) {
	t.Parallel()
	for _, o := range []string{"app.example.com", "*", "null", "ftp://x", "https://x/path", "https://x?q", "https://u@x", "https://x:0", "https://x:99999", "https://"} {
		_, err := gateway.NewCORS([]string{o})
		require.Error(t, err, o)
	}
	c, err := gateway.NewCORS([]string{" ", ""})
	require.NoError(t, err)
	require.False(t, c.Enabled())
	_, err = gateway.NewCORS([]string{"https://a\u200d\u200db.example"}) // no host UTS #46 takes
	require.Error(t, err)
	c, err = gateway.NewCORS([]string{"HTTPS://App.Example.COM:443", "http://[::1]:8080", "https://Bücher.example", "https://xn--caf-dma.example"})
	require.NoError(t, err)
	require.True(t, c.Enabled())
	h := c.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for origin, want := range map[string]int{
		"https://app.example.com": http.StatusTeapot, "http://[::1]:8080": http.StatusTeapot, "https://app.example.com:444": http.StatusForbidden,
		// A browser sends an internationalized host in its ASCII form,
		// whichever form the operator wrote.
		"https://xn--bcher-kva.example": http.StatusTeapot, "https://bücher.example": http.StatusForbidden, "https://xn--caf-dma.example": http.StatusTeapot,
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "http://api.example.com/x", nil)
		req.Header.Set("Origin", origin)
		h.ServeHTTP(rec, req)
		require.Equal(t, want, rec.Code, origin)
	}
}

// A tenant over its submit rate, calling over Connect or gRPC-web, gets
// RESOURCE_EXHAUSTED with the limit's reason and a RetryInfo: the limits
// interceptor runs for these protocols too.
func TestConnectTenantLimits(t *testing.T) {
	t.Parallel()
	slow := 0.01 // one submission every 100s
	lim, err := limits.New(limits.Config{Section: &limits.Section{Tenants: map[string]limits.Override{"acme": {SubmitRate: &slow}}}})
	require.NoError(t, err)
	b := setup(t, setupOpts{limits: lim, store: storesqlitetest.NewTestStore(t)})
	for i, p := range connectProtocols {
		submit := connectClient[oncejobv1.SubmitJobRequest, oncejobv1.SubmitJobResponse](b, "/oncejob.v1.JobService/SubmitJob", p.opts)
		req := func() *connect.Request[oncejobv1.SubmitJobRequest] {
			return connectRequest(&oncejobv1.SubmitJobRequest{Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "limits " + uuid.NewString()}}},
				keyAcme, map[string]string{"Idempotency-Key": uuid.NewString()})
		}
		if i == 0 {
			_, err := submit.CallUnary(context.Background(), req())
			require.NoError(t, err, "the burst of one")
		}
		_, err := submit.CallUnary(context.Background(), req())
		require.Equal(t, connect.CodeResourceExhausted, connect.CodeOf(err), p.name)
		require.Equal(t, limits.ReasonSubmitRate, connectReason(t, err), p.name)
		var ce *connect.Error
		require.ErrorAs(t, err, &ce)
		var delay time.Duration
		for _, d := range ce.Details() {
			if v, derr := d.Value(); derr == nil {
				if ri, ok := v.(*errdetails.RetryInfo); ok {
					delay = ri.GetRetryDelay().AsDuration()
				}
			}
		}
		require.Greater(t, delay, 90*time.Second, "%s: the RetryInfo says when to come back", p.name)
	}
}

// untouchedBody is a request body that records whether anyone read it.
type untouchedBody struct{ read atomic.Bool }

func (b *untouchedBody) Read([]byte) (int, error) {
	b.read.Store(true)
	return 0, io.ErrUnexpectedEOF
}

func (b *untouchedBody) Close() error { return nil }

// A Connect or gRPC-web call whose Content-Length is over what one request
// message and its framing can be is refused before its body is read, and
// draws nothing from the memory budget: before, the announced length was
// drawn whole, up to the budget, before the translation refused it, so a
// caller could take the budget from every other call without sending a
// byte (the JSON routes refuse such a body before the budget too). Lengths
// 1 and many bytes over the limit, on each protocol's content type; one at
// the limit is drawn and read.
func TestConnectBodyOverTheLimitDrawsNothing(t *testing.T) {
	t.Parallel()
	s, err := server.New(server.Config{Store: storesqlitetest.NewTestStore(t)})
	require.NoError(t, err)
	t.Cleanup(s.GRPC.Stop)
	maxMessage := server.MaxMessageBytes(server.DefaultMaxDocumentBytes)
	h, err := gateway.Connect(s.GRPC, maxMessage)
	require.NoError(t, err)
	budget := membudget.New(1 << 30)
	h.Guard(nil, budget)
	limit := int64(maxMessage) + 1<<20
	for _, ct := range []string{"application/proto", "application/json", "application/grpc-web+proto", "application/connect+proto"} {
		for _, n := range []int64{limit + 1, limit + 7<<20, 900 << 20} {
			body := &untouchedBody{}
			req := httptest.NewRequest(http.MethodPost, "/oncejob.v1.JobService/SubmitJob", body)
			req.ContentLength = n
			req.Header.Set("Content-Type", ct)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			require.False(t, body.read.Load(), "%s, %d bytes: the body was read", ct, n)
			require.Zero(t, budget.Peak(), "%s, %d bytes: drawn from the budget", ct, n)
			if strings.HasPrefix(ct, "application/grpc") {
				require.Equal(t, "8", rec.Header().Get("Grpc-Status"), "%s: RESOURCE_EXHAUSTED", ct)
			} else {
				require.Equal(t, http.StatusTooManyRequests, rec.Code, "%s: RESOURCE_EXHAUSTED", ct)
				require.Contains(t, rec.Body.String(), `"resource_exhausted"`)
			}
		}
	}
	body := &untouchedBody{}
	req := httptest.NewRequest(http.MethodPost, "/oncejob.v1.JobService/SubmitJob", body)
	req.ContentLength = limit
	req.Header.Set("Content-Type", "application/proto")
	h.ServeHTTP(httptest.NewRecorder(), req)
	require.Equal(t, limit, budget.Peak(), "a body at the limit is drawn")
	require.Zero(t, budget.Used(), "and given back")
}

// A gRPC-web or gRPC call of unknown length (chunked) draws each message
// from the budget when the message's 5-byte prefix arrives, by the length
// it announces: the translation and the gRPC server size the message's
// buffer by that length before its bytes come, so a prefix announcing
// megabytes and a body that then stalls holds them. Before, such a body
// was drawn as it arrived: 5 bytes for a 4 MiB buffer. Lengths 1 and
// 4 MiB; the draw given back when the call ends.
func TestConnectEnvelopeOfUnknownLengthIsDrawnByItsPrefix(t *testing.T) {
	t.Parallel()
	s, err := server.New(server.Config{Store: storesqlitetest.NewTestStore(t)})
	require.NoError(t, err)
	t.Cleanup(s.GRPC.Stop)
	h, err := gateway.Connect(s.GRPC, server.MaxMessageBytes(server.DefaultMaxDocumentBytes))
	require.NoError(t, err)
	budget := membudget.New(1 << 30)
	h.Guard(nil, budget)
	for _, ct := range []string{"application/grpc-web+proto", "application/grpc-web"} {
		for _, n := range []uint32{1, 4 << 20} {
			pr, pw := io.Pipe()
			t.Cleanup(func() { pw.CloseWithError(io.ErrUnexpectedEOF) }) // a failed check leaves no call behind
			req := httptest.NewRequest(http.MethodPost, "/oncejob.v1.JobService/SubmitJob", pr)
			req.ContentLength = -1
			req.Header.Set("Content-Type", ct)
			done := make(chan struct{})
			go func() { defer close(done); h.ServeHTTP(httptest.NewRecorder(), req) }()
			prefix := []byte{0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
			for _, b := range prefix { // a byte at a time: the prefix split across reads
				_, err := pw.Write([]byte{b})
				require.NoError(t, err)
			}
			require.Eventually(t, func() bool { return budget.Used() >= int64(n)+5 }, 10*time.Second, time.Millisecond,
				"%s: a stalled %d-byte message is drawn by its prefix (drawn %d)", ct, n, budget.Used())
			pw.CloseWithError(io.ErrUnexpectedEOF)
			<-done
			require.Zero(t, budget.Used(), "%s: given back", ct)
		}
	}
}
