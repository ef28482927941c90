package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
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

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// The load of the fault tests: clients that submit and retry with the same
// key, watchers that resume after the last seq, and a health poller. Each
// records what it saw; the tests check it against the store afterwards.

// callDeadline bounds every unary call of the fault tests' clients.
const callDeadline = 2 * time.Second

// storeUnavailable reports whether err is the service's answer to a store
// outage: UNAVAILABLE with ErrorInfo STORE_UNAVAILABLE.
func storeUnavailable(err error) bool {
	st := status.Convert(err)
	if st.Code() != codes.Unavailable {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "STORE_UNAVAILABLE" {
			return true
		}
	}
	return false
}

// requireOutageAnswer accepts an error only as an outage answer: store
// unavailable, or the call's own deadline passing (a stalled store; gRPC
// ends the call at its deadline).
func requireOutageAnswer(t *testing.T, err error) {
	t.Helper()
	code := status.Code(err)
	require.True(t, storeUnavailable(err) || code == codes.DeadlineExceeded,
		"during a store outage a call must be UNAVAILABLE/STORE_UNAVAILABLE or DEADLINE_EXCEEDED, got %v", err)
}

// submitDoc is the document of a fault test's key: one to three chunks of
// the kill pipeline, different for every key (so nothing deduplicates).
func submitDoc(key string, i int) string {
	var words []string
	for w := range 30 + (i%3)*70 {
		words = append(words, fmt.Sprintf("%s-%d", key, w))
	}
	return strings.Join(words, " ")
}

// submitters are clients, each submitting new keys one after another and
// retrying a key, with the same request, until it is answered.
type submitters struct {
	mu     sync.Mutex
	acked  map[string]string // key -> job id, from an OK answer
	failed int               // calls answered with an outage error
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// startSubmitters runs n clients on client until stop. Keys are
// prefix-<client>-<n>; each client pauses pause between keys.
func startSubmitters(t *testing.T, client oncejobv1.JobServiceClient, n int, prefix string, pause time.Duration) *submitters {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &submitters{acked: map[string]string{}, cancel: cancel}
	for c := range n {
		s.wg.Go(func() {
			for k := 0; ctx.Err() == nil; k++ {
				key := fmt.Sprintf("%s-%d-%d", prefix, c, k)
				s.submitUntilAnswered(ctx, t, client, key, submitDoc(key, k))
				select {
				case <-ctx.Done():
				case <-time.After(pause):
				}
			}
		})
	}
	return s
}

func (s *submitters) submitUntilAnswered(ctx context.Context, t *testing.T, client oncejobv1.JobServiceClient, key, doc string) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		cctx, cancel := context.WithTimeout(context.Background(), callDeadline)
		cctx = metadata.AppendToOutgoingContext(cctx, "idempotency-key", key)
		start := time.Now()
		resp, err := client.SubmitJob(cctx, &oncejobv1.SubmitJobRequest{
			Pipeline: "summarize",
			Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: doc}},
		})
		took := time.Since(start)
		cancel()
		if err == nil {
			outcome := resp.GetOutcome()
			if attempt == 0 && outcome != oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_CREATED {
				t.Errorf("key %s: first call answered %v", key, outcome)
			}
			s.mu.Lock()
			s.acked[key] = resp.GetJob().GetId()
			s.mu.Unlock()
			return
		}
		if !storeUnavailable(err) && status.Code(err) != codes.DeadlineExceeded || took > callDeadline+time.Second {
			t.Errorf("key %s: SubmitJob answered %v after %s; a store outage must be UNAVAILABLE/STORE_UNAVAILABLE or the call's deadline", key, err, took)
			return
		}
		s.mu.Lock()
		s.failed++
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop ends the clients and returns the acknowledged keys and how many
// calls failed on the way.
func (s *submitters) stop() (map[string]string, int) {
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked, s.failed
}

// ackedIDs returns the job ids answered so far.
func (s *submitters) ackedIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.acked))
	for _, id := range s.acked {
		ids = append(ids, id)
	}
	return ids
}

// resumingWatch watches a job to its end through outages: on an error it
// calls again with the last seq it received. It reports every event once
// (if the service sends each once), and the errors it resumed after.
type watchResult struct {
	events  []string
	resumed []error
	err     error // a failure to finish
}

func resumingWatch(client oncejobv1.JobServiceClient, id string, limit time.Duration) <-chan watchResult {
	out := make(chan watchResult, 1)
	go func() {
		var got watchResult
		defer func() { out <- got }()
		deadline := time.Now().Add(limit)
		var last int32
		for time.Now().Before(deadline) {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			err := watchOnce(ctx, client, id, &last, &got.events)
			cancel()
			if err == nil {
				return
			}
			got.resumed = append(got.resumed, err)
			time.Sleep(50 * time.Millisecond)
		}
		got.err = fmt.Errorf("the watch of %s did not end within %s", id, limit)
	}()
	return out
}

// watchOnce is one WatchJob stream after *last; nil when it ended cleanly.
func watchOnce(ctx context.Context, client oncejobv1.JobServiceClient, id string, last *int32, events *[]string) error {
	stream, err := client.WatchJob(ctx, &oncejobv1.WatchJobRequest{JobId: id, AfterSeq: *last})
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		*events = append(*events, protoEvent(resp.GetEvent()))
		*last = resp.GetEvent().GetSeq()
	}
}

// healthPoller polls the health of JobService (readiness) and of the
// overall service "" (liveness) until stopped.
type healthPoller struct {
	mu       sync.Mutex
	notReady bool // JobService was seen NOT_SERVING
	deadLive []string
	cancel   context.CancelFunc
	done     chan struct{}
	hc       healthpb.HealthClient
}

func pollHealth(t *testing.T, addr string) *healthPoller {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	h := &healthPoller{cancel: cancel, done: make(chan struct{}), hc: healthpb.NewHealthClient(conn)}
	go func() {
		defer close(h.done)
		for ctx.Err() == nil {
			if h.status(oncejobv1.JobService_ServiceDesc.ServiceName) == healthpb.HealthCheckResponse_NOT_SERVING {
				h.mu.Lock()
				h.notReady = true
				h.mu.Unlock()
			}
			if st := h.status(""); st != healthpb.HealthCheckResponse_SERVING {
				h.mu.Lock()
				h.deadLive = append(h.deadLive, st.String())
				h.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return h
}

func (h *healthPoller) status(service string) healthpb.HealthCheckResponse_ServingStatus {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := h.hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return healthpb.HealthCheckResponse_UNKNOWN
	}
	return resp.GetStatus()
}

// waitReady waits until JobService's health is want.
func (h *healthPoller) waitReady(t *testing.T, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	require.Eventually(t, func() bool {
		return h.status(oncejobv1.JobService_ServiceDesc.ServiceName) == want
	}, 60*time.Second, 20*time.Millisecond, "JobService health never became %v", want)
}

// stop returns whether JobService was seen NOT_SERVING, and every status
// other than SERVING seen on the liveness service.
func (h *healthPoller) stop() (sawNotReady bool, liveness []string) {
	h.cancel()
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.notReady, h.deadLive
}

// requireServerAnswered reads the server's log: every unary JobService
// call it finished was answered with a code the outage allows, within the
// call's deadline (plus scheduling slack). A handler that hangs after its
// client gave up shows here.
func requireServerAnswered(t *testing.T, p *proc) {
	t.Helper()
	allowed := map[string]bool{"OK": true, "Unavailable": true, "DeadlineExceeded": true, "Canceled": true, "InvalidArgument": true, "NotFound": true}
	calls := 0
	for _, line := range strings.Split(p.logs.String(), "\n") {
		if !strings.Contains(line, `"finished call"`) || !strings.Contains(line, "oncejob.v1.JobService") {
			continue
		}
		var f map[string]any
		if json.Unmarshal([]byte(line), &f) != nil {
			continue
		}
		calls++
		code, _ := f["grpc.code"].(string)
		require.True(t, allowed[code], "the server answered %s: %s", code, line)
		if f["grpc.component"] != "server" || f["grpc.method_type"] != "unary" {
			continue
		}
		msText, _ := f["grpc.time_ms"].(string)
		ms, err := strconv.ParseFloat(msText, 64)
		require.NoError(t, err, "grpc.time_ms of %s", line)
		require.Less(t, ms, float64((callDeadline + time.Second).Milliseconds()), "a call took longer than its deadline: %s", line)
	}
	require.Positive(t, calls, "no finished calls in the server's log")
}
