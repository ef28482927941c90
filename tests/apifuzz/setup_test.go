// Package apifuzz_test sends seeded hostile requests to every RPC and every
// HTTP route of a real server (the gRPC server and the HTTP gateway that
// `oncejob serve` runs, on loopback listeners, on each store) and checks
// that a caller's mistake is never the server's fault: no INTERNAL,
// UNKNOWN, UNAVAILABLE or 5xx, no panic, nothing written by a refused
// request, and a normal request answered afterwards
// (docs/operations.md, "Bad input").
//
//	go test ./tests/apifuzz                               # the CI run
//	go test ./tests/apifuzz -apifuzz.requests 200000 -apifuzz.seed 42
package apifuzz_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/grpclog"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/oncejob/oncejob/gateway"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/store/storesqlite/storesqlitetest"
	"github.com/oncejob/oncejob/watch"
)

var (
	flagRequests = flag.Int("apifuzz.requests", 5000, "hostile requests per store")
	flagSeed     = flag.Uint64("apifuzz.seed", 0, "the generator's seed; 0: a new one, printed")
)

func TestMain(m *testing.M) {
	// grpc-gateway logs each header it cannot forward; the fuzzer sends
	// hundreds on purpose.
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"))
}

const (
	keyAcme   = "acme-fuzz-key"
	keyGlobex = "globex-fuzz-key"
	// maxDocumentBytes is small so that oversize documents and bodies cost
	// little: the limits scale from it as in `serve`.
	maxDocumentBytes = 64 << 10
)

// fuzzStore is what the fuzzer reads its snapshots from: both stores.
type fuzzStore interface {
	server.Store
	store.WatchStore
}

type target struct {
	store  fuzzStore
	conn   *grpc.ClientConn
	base   string // http://127.0.0.1:port
	client *http.Client
	deep   map[protoreflect.FullName][]byte // deepNesting's
}

// start runs the server as `serve` does, without workers (so nothing but
// the requests changes the rows): the gRPC server with its interceptor
// chain and a watch hub on a loopback listener, the HTTP gateway on
// another, with the body limit `serve` derives from the document limit.
func start(t *testing.T, st fuzzStore) *target {
	t.Helper()
	keysFile := filepath.Join(t.TempDir(), "keys.yaml")
	require.NoError(t, os.WriteFile(keysFile, []byte(fmt.Sprintf(
		"keys:\n  - tenant: acme\n    sha256: %s\n  - tenant: globex\n    sha256: %s\n    role: submitter\n",
		tenant.HashKey(keyAcme), tenant.HashKey(keyGlobex))), 0o600))
	keys, err := tenant.LoadKeys(keysFile)
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	hub, err := watch.New(watch.Config{Store: st, Logger: logger, PollInterval: 500 * time.Millisecond})
	require.NoError(t, err)
	hubCtx, stopHub := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { hub.Run(hubCtx); close(hubDone) }()

	s, err := server.New(server.Config{Store: st, Keys: keys, Logger: logger, Watch: hub, MaxDocumentBytes: maxDocumentBytes})
	require.NoError(t, err)
	grpcLis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = s.GRPC.Serve(grpcLis) }()

	inproc, stopInproc, err := gateway.InProcess(s.GRPC)
	require.NoError(t, err)
	gw, err := gateway.New(context.Background(), gateway.Config{
		Conn: inproc, Streams: s.Local, Logger: logger, MaxBodyBytes: gateway.MaxBodyBytesFor(maxDocumentBytes), MaxMessageBytes: server.MaxMessageBytes(maxDocumentBytes),
	})
	require.NoError(t, err)
	httpLis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	httpSrv := &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = httpSrv.Serve(httpLis) }()

	conn, err := grpc.NewClient(grpcLis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	require.NoError(t, err)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 30 * time.Second}

	t.Cleanup(func() {
		_ = conn.Close()
		hub.Shutdown() // watches end first, or the servers would wait for them
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = httpSrv.Shutdown(ctx)
		client.CloseIdleConnections()
		stopInproc()
		s.GRPC.Stop()
		stopHub()
		<-hubDone
	})
	return &target{store: st, conn: conn, base: "http://" + httpLis.Addr().String(), client: client, deep: map[protoreflect.FullName][]byte{}}
}

// forEachStore runs fn on a fresh Postgres schema and a fresh embedded
// store.
func forEachStore(t *testing.T, fn func(t *testing.T, st fuzzStore)) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, storepgtest.NewTestStore(t))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, storesqlitetest.NewTestStore(t))
	})
}

// snapshot is a digest of every row of a tenant a request could write:
// its jobs (status, stage, attempt, labels, updated_at...), runs and
// schedules, as the store answers them.
func snapshot(t *testing.T, st fuzzStore, tenantName string) [32]byte {
	t.Helper()
	ctx := context.Background()
	jobs, err := st.JobList(ctx, &store.JobListParams{Tenant: tenantName, Limit: 500})
	require.NoError(t, err)
	runs, err := st.RunList(ctx, &store.RunListParams{Tenant: tenantName, Limit: 100})
	require.NoError(t, err)
	schedules, err := st.ScheduleList(ctx, &store.ScheduleListParams{Tenant: tenantName, Limit: 100})
	require.NoError(t, err)
	b, err := json.Marshal([]any{jobs.Jobs, runs.Runs, schedules.Schedules})
	require.NoError(t, err)
	return sha256.Sum256(b)
}
