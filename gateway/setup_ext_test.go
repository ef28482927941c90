package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/oncejob/oncejob/gateway"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/server/limits"
	"github.com/oncejob/oncejob/server/membudget"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
	"github.com/oncejob/oncejob/store/storesqlite/storesqlitetest"
	"github.com/oncejob/oncejob/store/storetest"
	"github.com/oncejob/oncejob/watch"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"))
}

// API keys of the two tenants the tests use.
const (
	keyAcme   = "acme-secret-key"
	keyGlobex = "globex-secret-key"
	// keyAcmeSubmitter is acme's, with the submitter role: no operator RPCs.
	keyAcmeSubmitter = "acme-submitter-key"
)

// testStore is what the tests drive: both stores implement it.
type testStore interface {
	server.Store
	store.EngineStore
	store.WatchStore
}

type testBundle struct {
	store testStore
	hub   *watch.Hub
	base  string // http://127.0.0.1:port
	// handler is the gateway, for a test that serves it otherwise.
	handler http.Handler
	gateway *gateway.Gateway
}

type setupOpts struct {
	store        testStore // default: a fresh Postgres schema
	maxBodyBytes int64
	heartbeat    time.Duration
	limits       *limits.Limits
	// corsOrigins are the origins whose pages may call (serve
	// --cors-allowed-origins); default none.
	corsOrigins []string
	// memory is the gateway's memory budget (the server's is unlimited);
	// writeTimeout its response write timeout; default none and the
	// default.
	memory       *membudget.Budget
	writeTimeout time.Duration
	// sendBuffer, when set, is each accepted connection's socket send
	// buffer, so an unread response blocks its write after that much
	// rather than after what the kernel would buffer.
	sendBuffer int
}

// setup runs the gRPC server (with a watch hub) and, listening on loopback
// as serve mounts them, the gateway on it (in process) and its Connect and
// gRPC-web face, both behind the CORS policy of opts.corsOrigins.
func setup(t *testing.T, opts setupOpts) *testBundle {
	t.Helper()
	st := opts.store
	if st == nil {
		st = storepgtest.NewTestStore(t)
	}
	keysFile := filepath.Join(t.TempDir(), "keys.yaml")
	require.NoError(t, os.WriteFile(keysFile, []byte(fmt.Sprintf(
		"keys:\n  - tenant: acme\n    sha256: %s\n  - tenant: globex\n    sha256: %s\n  - tenant: acme\n    sha256: %s\n    role: submitter\n",
		tenant.HashKey(keyAcme), tenant.HashKey(keyGlobex), tenant.HashKey(keyAcmeSubmitter))), 0o600))
	keys, err := tenant.LoadKeys(keysFile)
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))

	hub, err := watch.New(watch.Config{Store: st, Logger: logger, PollInterval: 500 * time.Millisecond})
	require.NoError(t, err)
	hubCtx, stopHub := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { hub.Run(hubCtx); close(hubDone) }()

	s, err := server.New(server.Config{Store: st, Keys: keys, Logger: logger, Watch: hub, Limits: opts.limits})
	require.NoError(t, err)
	srv := s.GRPC
	conn, stopConn, err := gateway.InProcess(srv)
	require.NoError(t, err)
	gw, err := gateway.New(context.Background(), gateway.Config{
		Conn: conn, Streams: s.Local, Logger: logger, MaxBodyBytes: opts.maxBodyBytes, Heartbeat: opts.heartbeat,
		Memory: opts.memory, WriteTimeout: opts.writeTimeout,
	})
	require.NoError(t, err)
	connect, err := gateway.Connect(srv, server.MaxMessageBytes(server.DefaultMaxDocumentBytes))
	require.NoError(t, err)
	cors, err := gateway.NewCORS(opts.corsOrigins)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/v1/", cors.Wrap(gw))
	mux.Handle("/", gw) // serve has the console here; the gateway's 404 is what tests see
	for _, path := range connect.Paths {
		mux.Handle(path, cors.Wrap(connect))
	}
	var lis net.Listener
	lis, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	if opts.sendBuffer > 0 {
		lis = sendBufferListener{Listener: lis, size: opts.sendBuffer}
	}
	httpSrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = httpSrv.Serve(lis) }()

	t.Cleanup(func() {
		hub.Shutdown() // watches end first, or the servers would wait for them
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = httpSrv.Shutdown(ctx)
		stopConn()
		srv.Stop()
		stopHub()
		<-hubDone
		http.DefaultClient.CloseIdleConnections()
	})
	return &testBundle{store: st, hub: hub, base: "http://" + lis.Addr().String(), handler: gw, gateway: gw}
}

// sendBufferListener sets each accepted connection's send buffer.
type sendBufferListener struct {
	net.Listener
	size int
}

func (l sendBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		err = errors.Join(err, tc.SetWriteBuffer(l.size))
	}
	return c, err
}

// forEachStore runs fn on a fresh Postgres schema and on a fresh embedded
// store, as subtests.
func forEachStore(t *testing.T, opts setupOpts, fn func(t *testing.T, b *testBundle)) {
	t.Run("postgres", func(t *testing.T) { fn(t, setup(t, opts)) })
	t.Run("sqlite", func(t *testing.T) {
		st := storesqlitetest.NewTestStore(t)
		o := opts
		o.store = st
		fn(t, setup(t, o))
	})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// drive moves every queued job through the engine's transitions: claim
// (running), four stage checkpoints (running) and publish (succeeded) —
// seqs 2 to 7 after the submission's 1. step runs before each transition.
func drive(t *testing.T, st testStore, want int, step func(seq int)) {
	t.Helper()
	ctx := context.Background()
	step(2)
	jobs, err := st.JobClaim(ctx, &store.JobClaimParams{Owner: "test-worker", Limit: want, LeaseDuration: time.Minute})
	require.NoError(t, err)
	require.Len(t, jobs, want)
	for i, stage := range []store.JobStage{store.JobStageTextExtracted, store.JobStageChunksReady, store.JobStageLLMDone, store.JobStageValidated} {
		step(3 + i)
		for _, j := range jobs {
			require.NoError(t, storetest.CheckpointWrite(ctx, st, &storetest.CheckpointWriteParams{
				Lease: lease(j), Stage: stage, Chunk: -1, StageKey: string(stage) + ":" + j.ID, CodeVersion: "1",
				Output: []byte(`{}`), AdvanceStage: true, Message: string(stage),
			}))
		}
	}
	step(7)
	for _, j := range jobs {
		_, err := storetest.Publish(ctx, st, &store.JobPublishParams{Lease: lease(j), Output: []byte(`{"summary":"s"}`), Message: "published"})
		require.NoError(t, err)
	}
}

func lease(j *store.Job) store.Lease {
	return store.Lease{JobID: j.ID, Owner: j.LeaseOwner, Attempt: j.Attempt}
}
