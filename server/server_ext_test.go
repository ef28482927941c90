package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/maintenance"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/server/limits"
	"github.com/oncejob/oncejob/server/membudget"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/store/storetest"
)

// API keys of the two tenants the tests use.
const (
	keyAcme   = "acme-secret-key"
	keyGlobex = "globex-secret-key"
)

type testBundle struct {
	store  server.Store
	client oncejobv1.JobServiceClient
	conn   *grpc.ClientConn
	server *server.Server
}

type setupOpts struct {
	pipelines      *pipeline.Registry
	maxDoc         int
	store          server.Store
	submitLinger   time.Duration
	submitMaxBatch int
	limits         *limits.Limits
	quiet          bool // log warnings only, not every call
	// providerBatches: the provider has a batch API.
	providerBatches bool
	// memory is the server's memory budget; nil: unlimited.
	memory *membudget.Budget
}

func setup(t *testing.T, opts setupOpts) *testBundle {
	t.Helper()
	st := opts.store
	if st == nil {
		st = storepgtest.NewTestStore(t)
	}
	keysFile := filepath.Join(t.TempDir(), "keys.yaml")
	require.NoError(t, os.WriteFile(keysFile, []byte(fmt.Sprintf(
		"keys:\n  - tenant: acme\n    sha256: %s\n  - tenant: globex\n    sha256: %s\n",
		tenant.HashKey(keyAcme), tenant.HashKey(keyGlobex))), 0o600))
	keys, err := tenant.LoadKeys(keysFile)
	require.NoError(t, err)
	logOpts := &slog.HandlerOptions{}
	if opts.quiet {
		logOpts.Level = slog.LevelWarn
	}

	s, err := server.New(server.Config{
		Store:            st,
		Pipelines:        opts.pipelines,
		ProviderBatches:  opts.providerBatches,
		Keys:             keys,
		Logger:           slog.New(slog.NewTextHandler(newTestWriter(t), logOpts)),
		MaxDocumentBytes: opts.maxDoc,
		SubmitLinger:     opts.submitLinger,
		SubmitMaxBatch:   opts.submitMaxBatch,
		Limits:           opts.limits,
		Memory:           opts.memory,
	})
	require.NoError(t, err)
	srv := s.GRPC
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &testBundle{store: st, client: oncejobv1.NewJobServiceClient(conn), conn: conn, server: s}
}

// testWriter logs a server's lines to its test until the test's cleanup:
// grpc's Server.Stop does not wait for the handlers it cancels, and a line
// a handler logs after its test has ended races with the test's end.
type testWriter struct {
	t    *testing.T
	mu   *sync.Mutex
	done *bool
}

func newTestWriter(t *testing.T) testWriter {
	w := testWriter{t: t, mu: new(sync.Mutex), done: new(bool)}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		*w.done = true
	})
	return w
}

func (w testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !*w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// as returns a context authenticated as the API key, with an idempotency key
// when idemKey is not empty.
func as(apiKey, idemKey string) context.Context {
	md := metadata.Pairs("authorization", "Bearer "+apiKey)
	if idemKey != "" {
		md.Append("idempotency-key", idemKey)
	}
	return metadata.NewOutgoingContext(context.Background(), md)
}

func submitReq(text string) *oncejobv1.SubmitJobRequest {
	params, _ := structpb.NewStruct(map[string]any{"language": "en", "max_words": 50})
	return &oncejobv1.SubmitJobRequest{
		Pipeline: "summarize",
		Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: text}, MediaType: "text/plain", Name: "doc.txt"},
		Params:   params,
		Labels:   map[string]string{"source": "test"},
	}
}

func requireReason(t *testing.T, err error, code codes.Code, reason string) {
	t.Helper()
	st, ok := status.FromError(err)
	require.True(t, ok, "not a status: %v", err)
	require.Equal(t, code, st.Code(), st.Message())
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			require.Equal(t, reason, info.GetReason())
			require.Equal(t, "oncejob.dev", info.GetDomain())
			return
		}
	}
	t.Fatalf("no ErrorInfo in %v", st.Details())
}

func requireFieldViolation(t *testing.T, err error, field, contains string) {
	t.Helper()
	st := status.Convert(err)
	require.Equal(t, codes.InvalidArgument, st.Code(), st.Message())
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				if v.GetField() == field {
					require.Contains(t, v.GetDescription(), contains)
					return
				}
			}
		}
	}
	t.Fatalf("no violation on %q in %v", field, st.Details())
}

func listAll(t *testing.T, client oncejobv1.JobServiceClient, apiKey string) []*oncejobv1.Job {
	t.Helper()
	resp, err := client.ListJobs(as(apiKey, ""), &oncejobv1.ListJobsRequest{PageSize: 500})
	require.NoError(t, err)
	return resp.GetJobs()
}

func TestSubmitJobConcurrentCallsOneKeyCreateOneJob(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const calls = 64
	type result struct {
		id       string
		outcome  oncejobv1.SubmitOutcome
		replayed string
	}
	results := make([]result, calls)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var header metadata.MD
			resp, err := b.client.SubmitJob(as(keyAcme, "invoice-42"), submitReq("pay invoice 42"), grpc.Header(&header))
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			results[i] = result{resp.GetJob().GetId(), resp.GetOutcome(), strings.Join(header.Get("idempotent-replayed"), ",")}
		}()
	}
	close(start)
	wg.Wait()

	created := 0
	for _, r := range results {
		require.Equal(t, results[0].id, r.id)
		switch r.outcome {
		case oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED:
			created++
			require.Empty(t, r.replayed)
		case oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING:
			require.Equal(t, "true", r.replayed)
		default:
			t.Fatalf("unexpected outcome %v", r.outcome)
		}
	}
	require.Equal(t, 1, created)
	jobs := listAll(t, b.client, keyAcme)
	require.Len(t, jobs, 1)
	require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_QUEUED, jobs[0].GetStatus())
}

func TestSubmitJobKeyReuseAndReplay(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	first, err := b.client.SubmitJob(as(keyAcme, "k1"), submitReq("alpha"))
	require.NoError(t, err)
	require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED, first.GetOutcome())
	require.True(t, strings.HasPrefix(first.GetJob().GetDedupKey(), "dedup:v1:"))
	require.Equal(t, "k1", first.GetJob().GetIdempotencyKey())

	// Another document under the same key.
	_, err = b.client.SubmitJob(as(keyAcme, "k1"), submitReq("beta"))
	requireReason(t, err, codes.InvalidArgument, "IDEMPOTENCY_KEY_REUSED")

	// Other params under the same key.
	other := submitReq("alpha")
	other.Params.Fields["language"] = structpb.NewStringValue("de")
	_, err = b.client.SubmitJob(as(keyAcme, "k1"), other)
	requireReason(t, err, codes.InvalidArgument, "IDEMPOTENCY_KEY_REUSED")

	// Only labels changed: a replay of the original.
	relabelled := submitReq("alpha")
	relabelled.Labels = map[string]string{"source": "elsewhere", "extra": "x"}
	var header metadata.MD
	again, err := b.client.SubmitJob(as(keyAcme, "k1"), relabelled, grpc.Header(&header))
	require.NoError(t, err)
	require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING, again.GetOutcome())
	require.Equal(t, first.GetJob().GetId(), again.GetJob().GetId())
	require.Equal(t, []string{"true"}, header.Get("idempotent-replayed"))
	require.Equal(t, map[string]string{"source": "test"}, again.GetJob().GetLabels(), "the original job is returned")

	require.Len(t, listAll(t, b.client, keyAcme), 1)
}

func TestSubmitJobKeyMissingOrMalformed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// grpc-go refuses to send non-printable metadata, so those cases are
	// covered by the interceptor's own test; here what a client can send.
	for _, ctx := range []context.Context{
		as(keyAcme, ""),
		as(keyAcme, strings.Repeat("k", 256)),
		metadata.AppendToOutgoingContext(as(keyAcme, "one"), "idempotency-key", "two"),
	} {
		_, err := b.client.SubmitJob(ctx, submitReq("x"))
		requireReason(t, err, codes.InvalidArgument, "IDEMPOTENCY_KEY_INVALID")
	}
	// The longest valid key is accepted.
	_, err := b.client.SubmitJob(as(keyAcme, strings.Repeat("k", 255)), submitReq("x"))
	require.NoError(t, err)
	require.Len(t, listAll(t, b.client, keyAcme), 1)
}

func TestTenantsAreIsolated(t *testing.T) {
	t.Parallel()
	st := storepgtest.NewTestStore(t)
	b := setup(t, setupOpts{store: st})
	a, err := b.client.SubmitJob(as(keyAcme, "same-key"), submitReq("shared text"))
	require.NoError(t, err)
	g, err := b.client.SubmitJob(as(keyGlobex, "same-key"), submitReq("shared text"))
	require.NoError(t, err)
	require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED, g.GetOutcome())
	require.NotEqual(t, a.GetJob().GetId(), g.GetJob().GetId())
	require.NotEqual(t, a.GetJob().GetDedupKey(), g.GetJob().GetDedupKey(), "dedup keys carry the tenant")

	_, err = b.client.GetJob(as(keyGlobex, ""), &oncejobv1.GetJobRequest{JobId: a.GetJob().GetId()})
	require.Equal(t, codes.NotFound, status.Code(err))
	got, err := b.client.GetJob(as(keyAcme, ""), &oncejobv1.GetJobRequest{JobId: a.GetJob().GetId()})
	require.NoError(t, err)
	require.Equal(t, a.GetJob().GetId(), got.GetJob().GetId())

	globexJobs := listAll(t, b.client, keyGlobex)
	require.Len(t, globexJobs, 1)
	require.Equal(t, g.GetJob().GetId(), globexJobs[0].GetId())

	// Acme's computation succeeds. Acme's next identical submission is
	// deduplicated against it; Globex's never is.
	_, err = storetest.Complete(context.Background(), st, &storetest.CompleteParams{Tenant: "acme", ID: a.GetJob().GetId(), Output: []byte(`{"summary":"s"}`)})
	require.NoError(t, err)
	dup, err := b.client.SubmitJob(as(keyAcme, "another-key"), submitReq("shared text"))
	require.NoError(t, err)
	require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_DEDUPLICATED, dup.GetOutcome())
	require.Equal(t, oncejobv1.JobStatus_JOB_STATUS_SUCCEEDED, dup.GetJob().GetStatus())
	require.Equal(t, a.GetJob().GetId(), dup.GetJob().GetDeduplicatedFrom())
	require.Equal(t, "s", dup.GetJob().GetOutput().GetFields()["summary"].GetStringValue())

	g2, err := b.client.SubmitJob(as(keyGlobex, "another-key"), submitReq("shared text"))
	require.NoError(t, err)
	require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED, g2.GetOutcome())
	require.Empty(t, g2.GetJob().GetDeduplicatedFrom())
}

func TestInvalidRequestsWriteNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{maxDoc: 1024})
	ctx := as(keyAcme, "k")

	unknown := submitReq("x")
	unknown.Pipeline = "translate"
	_, err := b.client.SubmitJob(ctx, unknown)
	requireFieldViolation(t, err, "pipeline", "known pipelines: summarize")

	_, err = b.client.SubmitJob(ctx, submitReq(strings.Repeat("x", 1025)))
	requireFieldViolation(t, err, "document", "the limit is 1024 bytes")

	_, err = b.client.SubmitJob(ctx, submitReq(""))
	requireFieldViolation(t, err, "document", "must not be empty")

	noDoc := submitReq("x")
	noDoc.Document = nil
	_, err = b.client.SubmitJob(ctx, noDoc)
	requireFieldViolation(t, err, "document", "is required")

	badProfile := submitReq("x")
	badProfile.ModelProfile = "gpt-huge"
	_, err = b.client.SubmitJob(ctx, badProfile)
	requireFieldViolation(t, err, "model_profile", "allows default")

	badMedia := submitReq("x")
	badMedia.Document.MediaType = "not a type;;"
	_, err = b.client.SubmitJob(ctx, badMedia)
	requireFieldViolation(t, err, "document.media_type", "is not a media type")

	badLabel := submitReq("x")
	badLabel.Labels[strings.Repeat("l", 64)] = "v"
	_, err = b.client.SubmitJob(ctx, badLabel)
	requireFieldViolation(t, err, "labels", "keys must be")

	_, err = b.client.GetJob(ctx, &oncejobv1.GetJobRequest{JobId: "not-a-uuid"})
	requireFieldViolation(t, err, "job_id", "UUID")
	_, err = b.client.ListJobs(ctx, &oncejobv1.ListJobsRequest{PageToken: "garbage!"})
	requireFieldViolation(t, err, "page_token", "not a token")
	_, err = b.client.ListJobs(ctx, &oncejobv1.ListJobsRequest{PageSize: 501})
	requireFieldViolation(t, err, "page_size", "between 0 and 500")

	require.Empty(t, listAll(t, b.client, keyAcme), "no invalid request wrote a job")

	// The key was not consumed by the invalid requests.
	resp, err := b.client.SubmitJob(ctx, submitReq("x"))
	require.NoError(t, err)
	require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED, resp.GetOutcome())
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	_, err := b.client.SubmitJob(as("wrong-key", "k"), submitReq("x"))
	require.Equal(t, codes.Unauthenticated, status.Code(err))
	_, err = b.client.ListJobs(context.Background(), &oncejobv1.ListJobsRequest{})
	require.Equal(t, codes.Unauthenticated, status.Code(err))

	// Health needs no key.
	h, err := healthpb.NewHealthClient(b.conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, h.GetStatus())
}

func TestRequestIDEchoed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := metadata.AppendToOutgoingContext(as(keyAcme, ""), "x-request-id", "req-123")
	var header metadata.MD
	_, err := b.client.ListJobs(ctx, &oncejobv1.ListJobsRequest{}, grpc.Header(&header))
	require.NoError(t, err)
	require.Equal(t, []string{"req-123"}, header.Get("x-request-id"))

	header = nil
	_, err = b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{}, grpc.Header(&header))
	require.NoError(t, err)
	require.Len(t, header.Get("x-request-id"), 1)
	require.NotEmpty(t, header.Get("x-request-id")[0])
}

func TestListJobsPagesAndFilters(t *testing.T) {
	t.Parallel()
	reg, err := pipeline.Parse([]byte(`
pipelines:
  - name: summarize
    version: 1
    prompt: {version: "1", template: "S {{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object}
  - name: classify
    version: 1
    prompt: {version: "1", template: "C {{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object}
`))
	require.NoError(t, err)
	b := setup(t, setupOpts{pipelines: reg})
	var want []string
	for i := range 7 {
		r := submitReq(fmt.Sprintf("doc %d", i))
		if i%3 == 0 {
			r.Pipeline = "classify"
		}
		resp, err := b.client.SubmitJob(as(keyAcme, fmt.Sprintf("k%d", i)), r)
		require.NoError(t, err)
		want = append([]string{resp.GetJob().GetId()}, want...) // newest first
	}

	var got []string
	req := &oncejobv1.ListJobsRequest{PageSize: 3}
	for {
		resp, err := b.client.ListJobs(as(keyAcme, ""), req)
		require.NoError(t, err)
		require.LessOrEqual(t, len(resp.GetJobs()), 3)
		for _, j := range resp.GetJobs() {
			got = append(got, j.GetId())
		}
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	require.Equal(t, want, got)

	resp, err := b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{Pipeline: "classify"})
	require.NoError(t, err)
	require.Len(t, resp.GetJobs(), 3)
	resp, err = b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{Status: oncejobv1.JobStatus_JOB_STATUS_SUCCEEDED})
	require.NoError(t, err)
	require.Empty(t, resp.GetJobs())

	// A token is bound to its filters.
	first, err := b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{PageSize: 1})
	require.NoError(t, err)
	_, err = b.client.ListJobs(as(keyAcme, ""), &oncejobv1.ListJobsRequest{PageSize: 1, Pipeline: "classify", PageToken: first.GetNextPageToken()})
	requireFieldViolation(t, err, "page_token", "other filters")
}

func TestIdempotencyWindowFreesKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	first, err := b.client.SubmitJob(as(keyAcme, "windowed"), submitReq("w"))
	require.NoError(t, err)

	// The sweeper's clock is injected: an hour past the window frees the
	// key at once, and margins of an hour keep the test independent of the
	// database's clock.
	now := time.Now()
	sweeper := &maintenance.IdempotencyKeySweeper{Store: b.store, Window: time.Hour, Now: func() time.Time { return now }}
	n, err := sweeper.Sweep(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "a key inside the window stays")
	again, err := b.client.SubmitJob(as(keyAcme, "windowed"), submitReq("w"))
	require.NoError(t, err)
	require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING, again.GetOutcome())

	now = now.Add(2 * time.Hour)
	n, err = sweeper.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	// The key is free again: a new job. The old job stays.
	fresh, err := b.client.SubmitJob(as(keyAcme, "windowed"), submitReq("w"))
	require.NoError(t, err)
	require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED, fresh.GetOutcome())
	require.NotEqual(t, first.GetJob().GetId(), fresh.GetJob().GetId())
	_, err = b.client.GetJob(as(keyAcme, ""), &oncejobv1.GetJobRequest{JobId: first.GetJob().GetId()})
	require.NoError(t, err)
}

func TestPromptVersionMakesANewComputation(t *testing.T) {
	t.Parallel()
	registry := func(promptVersion string) *pipeline.Registry {
		r, err := pipeline.Parse([]byte(`
pipelines:
  - name: summarize
    version: 1
    prompt: {version: "` + promptVersion + `", template: "S {{.Text}}"}
    model_profiles: [default]
    output_schema: {type: object}
`))
		require.NoError(t, err)
		return r
	}
	st := storepgtest.NewTestStore(t)
	v1 := setup(t, setupOpts{pipelines: registry("1"), store: st})
	v2 := setup(t, setupOpts{pipelines: registry("2"), store: st})

	a, err := v1.client.SubmitJob(as(keyAcme, "a"), submitReq("same"))
	require.NoError(t, err)
	_, err = storetest.Complete(context.Background(), st, &storetest.CompleteParams{Tenant: "acme", ID: a.GetJob().GetId(), Output: []byte(`{}`)})
	require.NoError(t, err)

	same, err := v1.client.SubmitJob(as(keyAcme, "b"), submitReq("same"))
	require.NoError(t, err)
	require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_DEDUPLICATED, same.GetOutcome())

	bumped, err := v2.client.SubmitJob(as(keyAcme, "c"), submitReq("same"))
	require.NoError(t, err)
	require.Equal(t, oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED, bumped.GetOutcome())
	require.NotEqual(t, a.GetJob().GetDedupKey(), bumped.GetJob().GetDedupKey())
	require.Equal(t, "2", bumped.GetJob().GetPromptVersion())
}
