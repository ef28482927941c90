package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/server"
	"github.com/oncejob/oncejob/server/tenant"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// soakBudget is the --memory-budget of the soaked server; its VmHWM must
// stay under it.
const soakBudget = 512 << 20

// TestResourceSoak (issue #31): one submitter key does everything the
// issue found that made a server hold memory without bound, at once, for
// each store — non-reading WatchJobs streams over gRPC and SSE, maximal
// ListJobs pages over gRPC and HTTP clients that do not read them, runs
// whose params are copied into every item, HTTP bodies that trickle, 8 MB
// bodies without a key over gRPC and HTTP — while another tenant keeps
// working. The server
// (the real binary, --memory-budget 512MiB) must keep its peak resident
// memory (VmHWM) under its budget, answer every one of the other tenant's
// requests, and stay ready.
//
// The load is counted, not timed: each looping client makes soakRounds
// calls, and the other tenant goes on while any of them does (and for at
// least soakOtherRounds rounds). A load that ran for a time took whatever
// CPU the machine had (docs/performance.md, "Issue 32: CPU per test").
func TestResourceSoak(t *testing.T) {
	t.Parallel()
	for name, storeArgs := range map[string]func(t *testing.T) []string{
		"postgres": func(t *testing.T) []string {
			return []string{"--database-url", storepgtest.NewSchemaURL(t), "--migrate"}
		},
		"embedded": func(t *testing.T) []string { return []string{"--data-dir", t.TempDir()} },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			soak(t, storeArgs(t))
		})
	}
}

const (
	soakHostileKey = "soak-hostile-submitter-key"
	soakOtherKey   = "soak-other-tenant-key"
	// soakRounds is how many calls each looping hostile client makes:
	// maximal pages, 8 MB bodies.
	soakRounds = 20
	// soakOtherRounds is the least number of the other tenant's rounds.
	soakOtherRounds = 5
)

func soak(t *testing.T, storeArgs []string) {
	keys := writeFile(t, "keys.yaml", fmt.Sprintf("keys:\n  - tenant: hostile\n    role: submitter\n    sha256: %s\n  - tenant: other\n    role: submitter\n    sha256: %s\n",
		tenant.HashKey(soakHostileKey), tenant.HashKey(soakOtherKey)))
	addr, httpAddr := freeAddr(t), freeAddr(t)
	args := append([]string{"serve", "--grpc-addr", addr, "--http-addr", httpAddr, "--api-keys", keys,
		"--workers", "0", "--memory-budget", strconv.Itoa(soakBudget), "--request-read-timeout", "5s", "--http-read-header-timeout", "2s"}, storeArgs...)
	p := start(t, "serve-soak", nil, args...)
	t.Cleanup(p.stop)
	waitHealthy(t, p, addr)

	hostileConn := dialSoak(t, addr)
	hostile := oncejobv1.NewJobServiceClient(hostileConn)
	hctx := soakCtx(soakHostileKey)
	seedMaximalJobs(t, hostile, hctx, oncejobv1.NewRunServiceClient(hostileConn))
	rss, hwm := procMemory(t, p.cmd.Process.Pid)
	t.Logf("after seeding 40 maximal jobs and a run of 500 amplified items: VmRSS %d MiB, VmHWM %d MiB", rss>>20, hwm>>20)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	var refusedStreams atomic.Int64
	counted := hostileLoad(ctx, t, &wg, addr, httpAddr, &refusedStreams)

	// Meanwhile: another tenant's calls, /readyz, and the server's memory.
	otherConn := dialSoak(t, addr)
	other := oncejobv1.NewJobServiceClient(otherConn)
	var otherCalls, otherFailures int
	// The counted load is bounded by its calls, not by a time; a server
	// that wedges one of them would hold the loop until go test's timeout
	// (and the whole package with it), so the phase has a limit of its own.
	limit := time.Now().Add(3 * time.Minute)
	for i := 0; i < soakOtherRounds || counted.busy(); i++ {
		require.True(t, time.Now().Before(limit), "the hostile load's counted calls did not finish in 3 minutes: a call is stuck in the server")
		cctx, cancel := context.WithTimeout(soakCtx(soakOtherKey), 10*time.Second)
		resp, err := other.SubmitJob(metadata.AppendToOutgoingContext(cctx, "idempotency-key", fmt.Sprintf("other-%d", i)), &oncejobv1.SubmitJobRequest{
			Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: fmt.Sprintf("other %d", i)}},
		})
		if err == nil {
			_, err = other.GetJob(cctx, &oncejobv1.GetJobRequest{JobId: resp.GetJob().GetId()})
		}
		if err == nil {
			_, err = other.ListJobs(cctx, &oncejobv1.ListJobsRequest{PageSize: 10})
		}
		cancel()
		otherCalls++
		if err != nil {
			otherFailures++
			t.Logf("the other tenant's call failed: %v", err)
		}
		requireReady(t, httpAddr)
		time.Sleep(100 * time.Millisecond)
	}
	rss, hwm = procMemory(t, p.cmd.Process.Pid)
	t.Logf("after the hostile load (%d maximal pages, %d 8 MB bodies): VmRSS %d MiB, VmHWM %d MiB (budget %d MiB); %d watch streams refused; the other tenant made %d rounds, %d failed",
		counted.pages.Load(), counted.bodies.Load(), rss>>20, hwm>>20, soakBudget>>20, refusedStreams.Load(), otherCalls, otherFailures)
	require.Zero(t, otherFailures, "another tenant's requests failed under the hostile load")
	require.Less(t, hwm, int64(soakBudget), "the server's peak memory went past its budget")
	require.Positive(t, refusedStreams.Load(), "one key opened more watch streams than its limit")
}

// requireReady fails the test, with the probe's answer, unless /readyz
// answers 200.
func requireReady(t *testing.T, httpAddr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/readyz", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "/readyz under the hostile load")
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	require.Equal(t, http.StatusOK, resp.StatusCode, "/readyz under the hostile load: %s", body)
}

func dialSoak(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func soakCtx(key string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+key)
}

// maximalParams are 4 × 63 KiB of params and 64 labels of 255 bytes: the
// largest a job may carry beside its document.
func maximalParams(t *testing.T) (*structpb.Struct, map[string]string) {
	t.Helper()
	fields := map[string]any{}
	for i := range 4 {
		fields[fmt.Sprintf("p%d", i)] = strings.Repeat(string(rune('a'+i)), 63<<10)
	}
	params, err := structpb.NewStruct(fields)
	require.NoError(t, err)
	labels := map[string]string{}
	for i := range 64 {
		labels[fmt.Sprintf("l%02d", i)] = strings.Repeat("v", 255)
	}
	return params, labels
}

// seedMaximalJobs gives the hostile tenant 40 maximal jobs and a run of
// 500 items that copy maximal run params (the amplification).
func seedMaximalJobs(t *testing.T, jobs oncejobv1.JobServiceClient, ctx context.Context, runs oncejobv1.RunServiceClient) {
	t.Helper()
	params, labels := maximalParams(t)
	for i := range 40 {
		_, err := jobs.SubmitJob(metadata.AppendToOutgoingContext(ctx, "idempotency-key", fmt.Sprintf("max-%d", i)), &oncejobv1.SubmitJobRequest{
			Pipeline: "summarize", Params: params, Labels: labels,
			Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: fmt.Sprintf("maximal %d", i)}},
		})
		require.NoError(t, err)
	}
	run, err := runs.CreateRun(metadata.AppendToOutgoingContext(ctx, "idempotency-key", "amplified"), &oncejobv1.CreateRunRequest{
		Name: "amplified", Pipeline: "summarize", Params: params, Labels: labels,
	})
	require.NoError(t, err)
	for start := 0; start < 500; {
		items := make([]*oncejobv1.SubmitJobsItem, 1000)
		for i := range items {
			items[i] = &oncejobv1.SubmitJobsItem{IdempotencyKey: fmt.Sprintf("amp-%d", start+i), Request: &oncejobv1.SubmitJobRequest{
				Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: fmt.Sprintf("item %d", start+i)}},
			}}
		}
		// A thousand is over the bound: the server says how many fit.
		_, err := jobs.SubmitJobs(ctx, &oncejobv1.SubmitJobsRequest{RunId: run.GetRun().GetId(), Items: items})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		resp, err := jobs.SubmitJobs(ctx, &oncejobv1.SubmitJobsRequest{RunId: run.GetRun().GetId(), Items: items[:25]})
		require.NoError(t, err)
		require.Len(t, resp.GetResults(), 25)
		start += 25
	}
}

// soakLoops counts the hostile clients that loop a counted number of
// calls, and the calls they made.
type soakLoops struct {
	running       atomic.Int64
	pages, bodies atomic.Int64
}

// busy reports whether a counted loop is still making its calls.
func (l *soakLoops) busy() bool { return l.running.Load() > 0 }

// loop runs call soakRounds times (or until ctx ends) in a goroutine of
// wg, counting each call in n.
func (l *soakLoops) loop(ctx context.Context, wg *sync.WaitGroup, n *atomic.Int64, call func()) {
	l.running.Add(1)
	wg.Go(func() {
		defer l.running.Add(-1)
		for i := 0; i < soakRounds && ctx.Err() == nil; i++ {
			call()
			n.Add(1)
		}
	})
}

// hostileLoad starts the hostile key's load: until ctx ends, 80 WatchJobs
// streams from the start of the log whose client never reads (its key may
// open 64), 20 SSE watches and 10 HTTP ListJobs whose sockets are never
// read, and slow bodies; counted (the loops it returns), maximal gRPC
// pages and 8 MB unauthenticated bodies (bodies).
func hostileLoad(ctx context.Context, t *testing.T, wg *sync.WaitGroup, addr, httpAddr string, refused *atomic.Int64) *soakLoops {
	t.Helper()
	conns := make([]*grpc.ClientConn, 4)
	for i := range conns {
		conns[i] = dialSoak(t, addr)
	}
	for i := range 80 {
		wg.Go(func() {
			client := oncejobv1.NewJobServiceClient(conns[i%len(conns)])
			stream, err := client.WatchJobs(metadata.NewOutgoingContext(ctx, metadata.Pairs("authorization", "Bearer "+soakHostileKey)), &oncejobv1.WatchJobsRequest{})
			if err != nil {
				return
			}
			if h, err := stream.Header(); err == nil && len(h.Get(server.EstablishedHeader)) > 0 {
				<-ctx.Done() // never reads
				return
			}
			if _, err := stream.Recv(); status.Code(err) == codes.ResourceExhausted {
				refused.Add(1)
			}
		})
	}
	raw := func(request string) {
		wg.Go(func() {
			c, err := net.Dial("tcp", httpAddr)
			if err != nil {
				return
			}
			defer c.Close()
			_, _ = c.Write([]byte(request))
			<-ctx.Done() // never reads
		})
	}
	auth := "Authorization: Bearer " + soakHostileKey + "\r\n"
	for range 20 {
		raw("GET /v1/jobs:watch HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n" + auth + "\r\n")
	}
	for range 10 {
		raw("GET /v1/jobs?page_size=500 HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n")
	}
	loops := &soakLoops{}
	for range 4 {
		client := oncejobv1.NewJobServiceClient(conns[0])
		loops.loop(ctx, wg, &loops.pages, func() {
			_, _ = client.ListJobs(metadata.NewOutgoingContext(ctx, metadata.Pairs("authorization", "Bearer "+soakHostileKey)), &oncejobv1.ListJobsRequest{PageSize: 500})
		})
	}
	bodies(ctx, wg, loops, conns[len(conns)-1], httpAddr, auth)
	return loops
}

// soakBody is the size of the soak's large bodies: 8 MB.
const soakBody = 8_000_000

// bodies adds to the hostile load: until ctx ends, 40 authenticated HTTP
// POSTs whose 8 MB body trickles a byte every 200 ms (each started again
// once the server cuts it), and, without any key, 8 MB gRPC SubmitJob
// calls and 8 MB HTTP POSTs in counted loops (issue #31, findings 7 and
// 10).
func bodies(ctx context.Context, wg *sync.WaitGroup, loops *soakLoops, conn *grpc.ClientConn, httpAddr, auth string) {
	for range 40 {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := net.Dial("tcp", httpAddr)
				if err != nil {
					return
				}
				_, err = fmt.Fprintf(c, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nIdempotency-Key: slow\r\n%sContent-Length: %d\r\n\r\n", auth, soakBody)
				for err == nil && ctx.Err() == nil {
					_, err = c.Write([]byte{' '})
					select {
					case <-ctx.Done():
					case <-time.After(200 * time.Millisecond):
					}
				}
				_ = c.Close()
			}
		})
	}
	big := strings.Repeat("x", soakBody)
	body := `{"pipeline":"summarize","document":{"text":"` + big[:soakBody-64] + `"}}`
	for range 2 {
		client := oncejobv1.NewJobServiceClient(conn)
		loops.loop(ctx, wg, &loops.bodies, func() {
			_, _ = client.SubmitJob(metadata.AppendToOutgoingContext(ctx, "idempotency-key", "unauthenticated"), &oncejobv1.SubmitJobRequest{
				Pipeline: "summarize", Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: big}},
			})
		})
		loops.loop(ctx, wg, &loops.bodies, func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+httpAddr+"/v1/jobs", strings.NewReader(body))
			if err != nil {
				return
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "unauthenticated")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		})
	}
}

// procMemory returns a process's VmRSS and VmHWM in bytes.
func procMemory(t *testing.T, pid int) (rss, hwm int64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch {
		case err != nil:
		case name == "VmRSS":
			rss = kb << 10
		case name == "VmHWM":
			hwm = kb << 10
		}
	}
	require.Positive(t, hwm)
	return rss, hwm
}
