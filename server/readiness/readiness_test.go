package readiness_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/oncejob/oncejob/server/readiness"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// flakyStore answers pings while up, and blocks until the ping's deadline
// while down, as a stalled database does.
type flakyStore struct{ down atomic.Bool }

func (s *flakyStore) Ping(ctx context.Context) error {
	if s.down.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

const svc = "oncejob.v1.JobService"

func status(t *testing.T, hs *health.Server, service string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	resp, err := hs.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
	require.NoError(t, err)
	return resp.GetStatus()
}

func get(t *testing.T, h http.Handler) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	return rec.Code
}

func TestProbeFollowsTheStore(t *testing.T) {
	st := &flakyStore{}
	hs := health.NewServer()
	hs.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	p, err := readiness.New(readiness.Config{Store: st, Health: hs, Services: []string{svc}, Interval: 10 * time.Millisecond, Timeout: 20 * time.Millisecond})
	require.NoError(t, err)
	mux := http.NewServeMux()
	p.Mount(mux)
	ready := func() int {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code
	}
	live := func() int {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/livez", nil))
		return rec.Code
	}

	checked := &p.TestSignals().Checked
	checked.Init()
	waitChecked := func(ready bool) {
		t.Helper()
		_, err := checked.WaitFor(func(r bool) bool { return r == ready })
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	require.True(t, p.Ready())
	require.Equal(t, http.StatusOK, ready())

	st.down.Store(true)
	waitChecked(false)
	require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, status(t, hs, svc))
	require.False(t, p.Ready())
	require.Equal(t, http.StatusServiceUnavailable, ready())
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, status(t, hs, ""), "liveness stays up")
	require.Equal(t, http.StatusOK, live())

	st.down.Store(false)
	waitChecked(true)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, status(t, hs, svc))
	require.True(t, p.Ready())
	require.Equal(t, http.StatusOK, ready())
}

func TestCheckReturnsThePingError(t *testing.T) {
	st := &flakyStore{}
	p, err := readiness.New(readiness.Config{Store: st, Timeout: 10 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, p.Check(context.Background()))
	st.down.Store(true)
	require.ErrorIs(t, p.Check(context.Background()), context.DeadlineExceeded)
	require.False(t, p.Ready())
	require.Equal(t, http.StatusServiceUnavailable, get(t, p.ReadyzHandler()))

	_, err = readiness.New(readiness.Config{})
	require.Error(t, err, "a store is required")
}

// TestAddedCheckHoldsReadinessDown: a failing check (a relay that cannot
// claim) makes the process not ready while the store answers - health
// NOT_SERVING, /readyz 503 naming the check and its error - and ready again
// once it passes; the store's own failure is reported first.
func TestAddedCheckHoldsReadinessDown(t *testing.T) {
	st := &flakyStore{}
	hs := health.NewServer()
	p, err := readiness.New(readiness.Config{Store: st, Health: hs, Services: []string{svc}, Timeout: 10 * time.Millisecond})
	require.NoError(t, err)
	var failing atomic.Pointer[error]
	p.AddCheck(readiness.Check{Name: "relay", Err: func() error {
		if e := failing.Load(); e != nil {
			return *e
		}
		return nil
	}})
	body := func() (int, string) {
		rec := httptest.NewRecorder()
		p.ReadyzHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}

	require.NoError(t, p.Check(context.Background()))
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, status(t, hs, svc))

	claimErr := errors.New("claim failed in every round since 2026-12-03T00:00:00Z: datatype mismatch")
	failing.Store(&claimErr)
	require.ErrorIs(t, p.Check(context.Background()), claimErr)
	require.False(t, p.Ready())
	require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, status(t, hs, svc))
	code, text := body()
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not ready: relay: "+claimErr.Error()+"\n", text)

	st.down.Store(true)
	require.ErrorIs(t, p.Check(context.Background()), context.DeadlineExceeded)
	_, text = body()
	require.Equal(t, "not ready: the job store does not answer\n", text)

	st.down.Store(false)
	failing.Store(nil)
	require.NoError(t, p.Check(context.Background()))
	require.True(t, p.Ready())
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, status(t, hs, svc))
	code, _ = body()
	require.Equal(t, http.StatusOK, code)
}
