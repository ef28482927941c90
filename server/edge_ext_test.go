package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
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
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/server/limits"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// A SubmitJobs call that can never succeed is INVALID_ARGUMENT with a
// BadRequest on items and no RetryInfo, for a tenant under a submit rate as
// for one without: more than 1,000 items (before the rate limit sees it,
// so it spends no token), none, or more than the tenant's burst. Calls
// within the burst go on being admitted afterwards.
func TestSubmitJobsBatchThatCanNeverSucceedIsInvalidArgument(t *testing.T) {
	t.Parallel()
	rate, burst := 0.001, 5 // a token every 1000s: only the burst is there
	lim, err := limits.New(limits.Config{Section: &limits.Section{Tenants: map[string]limits.Override{
		"acme": {SubmitRate: &rate, SubmitBurst: &burst},
	}}})
	require.NoError(t, err)
	b := setup(t, setupOpts{limits: lim, quiet: true})
	items := func(n int) *oncejobv1.SubmitJobsRequest {
		r := &oncejobv1.SubmitJobsRequest{}
		for i := range n {
			r.Items = append(r.Items, &oncejobv1.SubmitJobsItem{IdempotencyKey: fmt.Sprintf("batch-%d-%d", n, i), Request: submitReq(fmt.Sprintf("doc %d", i))})
		}
		return r
	}
	for _, tc := range []struct {
		key, why string
		n        int
	}{
		{keyAcme, "over 1,000", 1001},
		{keyGlobex, "over 1,000, no limits", 1001},
		{keyAcme, "none", 0},
		{keyAcme, "over the burst", burst + 1},
		{keyAcme, "far over the burst", 1000},
	} {
		_, err := b.client.SubmitJobs(as(tc.key, ""), items(tc.n))
		st := status.Convert(err)
		require.Equal(t, codes.InvalidArgument, st.Code(), "%s: %v", tc.why, err)
		var bad *errdetails.BadRequest
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.BadRequest:
				bad = d
			case *errdetails.RetryInfo:
				t.Fatalf("%s: a retry hint on a call that can never succeed", tc.why)
			}
		}
		require.NotNil(t, bad, tc.why)
		require.Equal(t, "items", bad.GetFieldViolations()[0].GetField(), tc.why)
		if tc.n > burst && tc.n <= 1000 {
			require.Contains(t, st.Message(), "burst of 5", tc.why)
		}
	}
	// Nothing above spent a token: the whole burst is still there.
	resp, err := b.client.SubmitJobs(as(keyAcme, ""), items(burst))
	require.NoError(t, err)
	for _, r := range resp.GetResults() {
		require.Nil(t, r.GetError())
	}
}

// Health Check and Watch answer SERVING whatever unrelated metadata comes
// with them: an idempotency-key (valid, malformed, repeated), a bearer key
// nobody knows.
func TestHealthIgnoresUnrelatedMetadata(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{quiet: true})
	health := healthpb.NewHealthClient(b.conn)
	for _, md := range []metadata.MD{
		metadata.Pairs("idempotency-key", "k-1"),
		metadata.Pairs("idempotency-key", ""),
		metadata.Pairs("idempotency-key", "a", "idempotency-key", "b"),
		metadata.Pairs("idempotency-key", "k", "authorization", "Bearer nobody"),
	} {
		ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(context.Background(), md))
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		require.NoError(t, err, "%v", md)
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
		w, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
		got, err := w.Recv()
		require.NoError(t, err, "%v", md)
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, got.GetStatus())
		cancel()
	}
}

// rawCodec sends the bytes it is given as the request, as a client with a
// bug or an attacker would.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

func (rawCodec) Name() string { return "proto" }

// deepParams is a SubmitJobRequest whose params nest deeper than
// protobuf's decoding limit of 10,000.
func deepParams(t *testing.T) []byte {
	v := structpb.NewStringValue("bottom")
	for range 5100 { // a Value and a ListValue per round
		v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
	}
	req := submitReq("deep")
	req.Params = &structpb.Struct{Fields: map[string]*structpb.Value{"deep": v}}
	b, err := proto.MarshalOptions{}.Marshal(req)
	require.NoError(t, err)
	return b
}

// A request that is not valid protobuf — garbage, invalid UTF-8 in a
// string field, nesting beyond 10,000 — is INVALID_ARGUMENT with the
// ErrorInfo MALFORMED_MESSAGE, on unary calls and streams, authenticated
// or not (it is refused before authentication), and counted; the server
// answers normal calls afterwards. Seeded random bytes on every method
// never get INTERNAL, UNKNOWN or UNAVAILABLE.
func TestMalformedProtobufIsInvalidArgument(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{quiet: true})
	invalidUTF8 := []byte{0x0a, 0x03, 'a', 0xff, 0xfe} // GetJobRequest.job_id
	cases := []struct {
		name, method string
		body         []byte
		stream       bool
	}{
		{"garbage", oncejobv1.JobService_GetJob_FullMethodName, []byte{0xff, 0xff, 0xff, 0xff}, false},
		{"truncated", oncejobv1.JobService_SubmitJob_FullMethodName, []byte{0x0a, 0x7f, 'x'}, false},
		{"invalid UTF-8", oncejobv1.JobService_GetJob_FullMethodName, invalidUTF8, false},
		{"too deep", oncejobv1.JobService_SubmitJob_FullMethodName, deepParams(t), false},
		{"invalid UTF-8, stream", oncejobv1.JobService_WatchJob_FullMethodName, invalidUTF8, true},
		{"garbage, stream", oncejobv1.JobService_WatchJobs_FullMethodName, []byte{0xff}, true},
	}
	call := func(ctx context.Context, method string, body []byte, stream bool) error {
		if !stream {
			var reply emptypb.Empty
			return b.conn.Invoke(ctx, method, body, &reply, grpc.ForceCodecV2(rawCodec{}))
		}
		s, err := b.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method, grpc.ForceCodecV2(rawCodec{}))
		if err != nil {
			return err
		}
		if err := s.SendMsg(body); err != nil {
			return err
		}
		if err := s.CloseSend(); err != nil {
			return err
		}
		var reply emptypb.Empty
		return s.RecvMsg(&reply)
	}
	before := b.server.MalformedRequests()
	refused := int64(0)
	for _, tc := range cases {
		for _, key := range []string{keyAcme, "nobody"} {
			ctx, cancel := context.WithTimeout(as(key, "malformed-1"), 10*time.Second)
			err := call(ctx, tc.method, tc.body, tc.stream)
			cancel()
			if key == "nobody" {
				// Refused when its headers arrive, before its message is
				// read (issue #31, finding 7).
				require.Equal(t, codes.Unauthenticated, status.Code(err), "%s: the message is read after auth", tc.name)
				continue
			}
			requireReason(t, err, codes.InvalidArgument, server.ReasonMalformedMessage)
			refused++
		}
	}
	require.Equal(t, refused, b.server.MalformedRequests()-before, "each refusal counted")

	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	methods := oncejobv1.JobService_ServiceDesc.Methods
	for i := range 300 {
		body := make([]byte, rng.IntN(64))
		for j := range body {
			body[j] = byte(rng.IntN(256))
		}
		m := methods[rng.IntN(len(methods))]
		ctx, cancel := context.WithTimeout(as(keyAcme, fmt.Sprintf("fuzz-%d", i)), 10*time.Second)
		err := call(ctx, "/"+oncejobv1.JobService_ServiceDesc.ServiceName+"/"+m.MethodName, body, false)
		cancel()
		switch status.Code(err) {
		case codes.Internal, codes.Unknown, codes.Unavailable:
			t.Fatalf("seed %d: %s with %x: %v", seed, m.MethodName, body, err)
		}
	}

	_, err := b.client.SubmitJob(as(keyAcme, "after-malformed"), submitReq("still serving"))
	require.NoError(t, err)
}

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A flood of refused keys writes at most a log line a second (each saying
// how many it stands for), while Auth.Refused counts every refusal; other
// calls are logged as before.
func TestRefusalsAreLoggedAtABoundedRate(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	keysFile := filepath.Join(t.TempDir(), "keys.yaml")
	require.NoError(t, os.WriteFile(keysFile, []byte("keys:\n  - tenant: acme\n    sha256: "+tenant.HashKey(keyAcme)+"\n"), 0o600))
	keys, err := tenant.LoadKeys(keysFile)
	require.NoError(t, err)
	s, err := server.New(server.Config{Store: storepgtest.NewTestStore(t), Keys: keys, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = s.GRPC.Serve(lis) }()
	t.Cleanup(s.GRPC.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	client := oncejobv1.NewJobServiceClient(conn)

	const n = 500
	start := time.Now()
	for i := range n {
		_, err := client.GetJob(as(fmt.Sprintf("ojk_made%08d_secret", i), ""), &oncejobv1.GetJobRequest{JobId: "00000000-0000-0000-0000-000000000000"})
		require.Equal(t, codes.Unauthenticated, status.Code(err))
	}
	seconds := int(time.Since(start)/time.Second) + 1
	_, err = client.GetJob(as(keyAcme, ""), &oncejobv1.GetJobRequest{JobId: "00000000-0000-0000-0000-000000000000"})
	require.Equal(t, codes.NotFound, status.Code(err))

	lines := strings.Count(logs.String(), "grpc.code=Unauthenticated")
	t.Logf("%d refusals in %ds: %d log lines", n, seconds, lines)
	require.GreaterOrEqual(t, lines, 1, "refusals are still logged")
	require.LessOrEqual(t, lines, seconds, "at most a line a second")
	require.Contains(t, logs.String(), "refusals_not_logged=")
	require.Equal(t, 1, strings.Count(logs.String(), "grpc.code=NotFound"), "other calls are logged each")
	require.EqualValues(t, n, s.Auth.Refused())
}
