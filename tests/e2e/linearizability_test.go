package e2e

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/store/storepg/pgcluster"
	"github.com/oncejob/oncejob/store/storepg/pgproxy"
	"github.com/oncejob/oncejob/tests/linearizability"
)

// The linearizability checks: many clients submit and read jobs over a few
// keys while the store fails under them; porcupine then checks the history
// against the idempotency contract (tests/linearizability). The key window
// is short, so keys are freed and reused during the run.

const (
	linWindow   = 3 * time.Second
	linDuration = 9 * time.Second
	linSettle   = 30 * time.Second
	linKeys     = 12
)

// dialReconnecting dials addr with a short reconnect backoff: the embedded
// server is killed and restarted on the same address.
func dialReconnecting(t *testing.T, addr string) oncejobv1.JobServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 300 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return oncejobv1.NewJobServiceClient(conn)
}

// runLinearizability runs the load against client while faults runs (for
// linDuration), then until the history holds linKeys more jobs created
// than when the faults ended (at most linSettle more): a key comes back
// after its window once the store answers again, however long the machine
// took to get through the faults. Then it checks the history. allowed are
// the error codes an outage may answer with.
func runLinearizability(t *testing.T, client oncejobv1.JobServiceClient, faults func(ctx context.Context), allowed ...codes.Code) {
	t.Helper()
	faultCtx, endFaults := context.WithTimeout(context.Background(), linDuration)
	defer endFaults()
	loadCtx, endLoad := context.WithCancel(context.Background())
	defer endLoad()
	h := linearizability.NewHistory()
	var wg sync.WaitGroup
	wg.Go(func() {
		defer endLoad()
		faults(faultCtx)
		<-faultCtx.Done()
		settled := h.Reached(linearizability.Created, h.Counts()[linearizability.Created]+linKeys)
		select {
		case <-settled:
		case <-time.After(linSettle):
			t.Logf("the load settled for %s without %d more jobs created", linSettle, linKeys)
		}
	})
	errs := linearizability.Load{Prefix: t.Name(), Keys: linKeys}.Run(loadCtx, client, h)
	wg.Wait()

	counts := h.Counts()
	t.Logf("history: %d created, %d existing, %d reused, %d found, %d not found, %d failed; errors %v",
		counts[linearizability.Created], counts[linearizability.Existing], counts[linearizability.Reused],
		counts[linearizability.Found], counts[linearizability.NotFound], counts[linearizability.Failed], errs.ByCode)
	for code, n := range errs.ByCode {
		require.Contains(t, allowed, code, "%d calls answered %v, e.g. %v", n, code, errs.Samples[code])
	}
	require.Positive(t, counts[linearizability.Failed], "the faults never reached a call")
	require.Positive(t, counts[linearizability.Existing])
	require.Positive(t, counts[linearizability.Reused])
	require.Greater(t, counts[linearizability.Created], linKeys, "no key was created again after its window")

	start := time.Now()
	res, path, err := linearizability.Check(linearizability.Model(linWindow), h.Operations(), time.Minute, t.ArtifactDir)
	require.NoError(t, err)
	t.Logf("porcupine: %s in %s", res, time.Since(start).Round(time.Millisecond))
	require.Equal(t, porcupine.Ok, res, "the history is not linearizable under the idempotency contract; visualisation: %s", path)

	// Not vacuous: a key that made a new job after its window, checked on
	// its answered calls alone (quick to decide), passes the contract and
	// is refused by a model that remembers keys for an hour.
	requireWindowMatters(t, h.Operations())
}

// requireWindowMatters finds a key whose answered calls show a second job
// after the window, linearizable under the model, and refused under a
// model with a one-hour window.
func requireWindowMatters(t *testing.T, ops []porcupine.Operation) {
	t.Helper()
	byKey := map[string][]porcupine.Operation{}
	jobs := map[string]map[string]bool{}
	for _, op := range ops {
		in, out := op.Input.(linearizability.Input), op.Output.(linearizability.Output)
		if out.Outcome == linearizability.Failed {
			continue
		}
		byKey[in.Key] = append(byKey[in.Key], op)
		if out.Outcome == linearizability.Created {
			if jobs[in.Key] == nil {
				jobs[in.Key] = map[string]bool{}
			}
			jobs[in.Key][out.JobID] = true
		}
	}
	for key, created := range jobs {
		if len(created) < 2 {
			continue
		}
		res, _, err := linearizability.Check(linearizability.Model(linWindow), byKey[key], 10*time.Second, nil)
		require.NoError(t, err)
		if res != porcupine.Ok {
			continue // a failed call explains this key's answers; try another
		}
		res, _, err = linearizability.Check(linearizability.Model(time.Hour), byKey[key], 10*time.Second, nil)
		require.NoError(t, err)
		require.Equal(t, porcupine.Illegal, res, "key %s: a model with the wrong window accepted its history", key)
		return
	}
	t.Fatal("no key made a second job after its window with every call answered")
}

// TestLinearizabilityPostgres checks the contract on Postgres while its
// connections are cut after a submit committed, all cut, Postgres is
// restarted (immediate), the network stalls and a submit's commit is held
// past its caller's deadline (it lands after the caller gave up).
func TestLinearizabilityPostgres(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	p := e.proxy(t)
	_, addr := e.serve(t, p, 1, "--idempotency-window", linWindow.String())
	client := dialJobs(t, addr)
	at := func(ctx context.Context, d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	runLinearizability(t, client, func(ctx context.Context) {
		if !at(ctx, time.Second) {
			return
		}
		p.Inject(pgproxy.Fault{Statement: "JobSubmit", Action: pgproxy.CutAfter, Times: 3})
		if !at(ctx, time.Second) {
			return
		}
		p.CutAll()
		if !at(ctx, time.Second) {
			return
		}
		require.NoError(t, e.pg.Restart(context.Background(), pgcluster.Immediate, time.Second))
		if !at(ctx, 1500*time.Millisecond) {
			return
		}
		release := p.Stall()
		at(ctx, 1500*time.Millisecond)
		release()
		if !at(ctx, 500*time.Millisecond) {
			return
		}
		p.Inject(pgproxy.Fault{Statement: "JobSubmit", Action: pgproxy.StallCommit, Duration: callDeadline + 500*time.Millisecond, Times: 2})
	}, codes.Unavailable, codes.DeadlineExceeded)
}

// TestLinearizabilityEmbedded checks the contract on the embedded store
// while the whole server is SIGKILLed and restarted on its data directory.
func TestLinearizabilityEmbedded(t *testing.T) {
	t.Parallel()
	dir, addr := t.TempDir(), freeAddr(t)
	args := embeddedServeArgs(dir, addr, nil, "", "--workers", "1", "--idempotency-window", linWindow.String(), "--log-level", "info")
	s := start(t, "serve-0", nil, args...)
	waitHealthy(t, s, addr)
	client := dialReconnecting(t, addr)
	runLinearizability(t, client, func(ctx context.Context) {
		for round := 1; ; round++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2500 * time.Millisecond):
			}
			s.signal(syscall.SIGKILL)
			<-s.exited
			s = start(t, "serve-"+string(rune('0'+round)), nil, args...)
			waitHealthy(t, s, addr)
		}
	}, codes.Unavailable, codes.DeadlineExceeded)
	s.stop() // the last server exits cleanly
}
