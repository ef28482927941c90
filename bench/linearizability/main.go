// Command linearizability is the long run of the idempotency contract's
// linearizability check (tests/linearizability; `make test` runs a 9-second
// one per store): many clients submit and read jobs over a few keys for
// -duration while faults hit the store, then porcupine checks the history.
//
//   - postgres: the real `oncejob serve` on a throwaway cluster
//     (store/storepg/pgcluster) behind a fault proxy (store/storepg/pgproxy);
//     every -fault-every one fault, in turn: cut every connection, cut a
//     submit after it committed, restart Postgres (fast, then immediate),
//     stall the network, hold a submit's commit past its caller's deadline.
//
//   - embedded: `oncejob serve` on its embedded store, SIGKILLed and
//     restarted on its data directory every -fault-every.
//
//     cd bench/linearizability && go run .                       # both, 60s each
//     cd bench/linearizability && go run . -store postgres -duration 10m
//
// On a failed check it writes porcupine's visualisation to -out and exits
// 1. It is a separate module (replace => ../..), like bench/watch.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/pgcluster"
	"github.com/oncejob/oncejob/store/storepg/pgproxy"
	"github.com/oncejob/oncejob/tests/linearizability"
)

type config struct {
	stores     []string
	duration   time.Duration
	faultEvery time.Duration
	window     time.Duration
	load       linearizability.Load
	out        string
	checkLimit time.Duration
}

func main() {
	var c config
	var stores string
	flag.StringVar(&stores, "store", "postgres,embedded", "stores to run, comma-separated: postgres, embedded")
	flag.DurationVar(&c.duration, "duration", time.Minute, "length of each run")
	flag.DurationVar(&c.faultEvery, "fault-every", 3*time.Second, "time between faults")
	flag.DurationVar(&c.window, "window", 5*time.Second, "the server's --idempotency-window: keys are freed and reused during the run")
	flag.IntVar(&c.load.Clients, "clients", 8, "concurrent clients")
	flag.IntVar(&c.load.Keys, "keys", 16, "idempotency keys shared by the clients")
	flag.StringVar(&c.out, "out", "linearizability-failures", "directory of the visualisation of a failed check")
	flag.DurationVar(&c.checkLimit, "check-timeout", 5*time.Minute, "porcupine's time limit (Unknown after it)")
	flag.Parse()
	c.stores = strings.Split(stores, ",")
	ctx, stop := signalContext()
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "linearizability:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	root, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "oncejob-bench-lin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "oncejob")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/oncejob")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build: %w", err)
	}
	failed := false
	for _, s := range c.stores {
		var res porcupine.CheckResult
		var err error
		switch s {
		case "postgres":
			res, err = runPostgres(ctx, c, bin, tmp)
		case "embedded":
			res, err = runEmbedded(ctx, c, bin, tmp)
		default:
			return fmt.Errorf("-store: unknown store %q", s)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		failed = failed || res != porcupine.Ok
	}
	if failed {
		return errors.New("a check did not pass")
	}
	return nil
}

// server is one `oncejob serve` process.
type server struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

func startServer(bin, logPath string, args ...string) (*server, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	s := &server{cmd: cmd, log: log, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); log.Close(); close(s.done) }()
	return s, nil
}

func (s *server) kill(sig syscall.Signal) {
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func runPostgres(ctx context.Context, c config, bin, tmp string) (porcupine.CheckResult, error) {
	pg, err := pgcluster.Start(ctx)
	if err != nil {
		return "", err
	}
	defer pg.Close()
	st, err := storepg.Open(ctx, pg.URL("postgres"))
	if err != nil {
		return "", err
	}
	err = storepg.Migrate(ctx, st.Pool())
	st.Close()
	if err != nil {
		return "", err
	}
	proxy, err := pgproxy.Start(pg.Addr())
	if err != nil {
		return "", err
	}
	defer proxy.Close()
	addr, err := freeAddr()
	if err != nil {
		return "", err
	}
	srv, err := startServer(bin, filepath.Join(tmp, "postgres-serve.log"), "serve",
		"--database-url", pgcluster.URL(proxy.Addr(), "postgres"), "--grpc-addr", addr,
		"--workers", "2", "--lease-duration", "2s", "--idempotency-window", c.window.String(), "--log-level", "warn")
	if err != nil {
		return "", err
	}
	defer srv.kill(syscall.SIGTERM)
	client, err := dial(ctx, addr)
	if err != nil {
		return "", err
	}
	faults := []struct {
		name string
		do   func() error
	}{
		{"cut every connection", func() error { proxy.CutAll(); return nil }},
		{"cut a submit after it committed", func() error {
			proxy.Inject(pgproxy.Fault{Statement: "JobSubmit", Action: pgproxy.CutAfter, Times: 2})
			return nil
		}},
		{"restart Postgres (fast)", func() error { return pg.Restart(ctx, pgcluster.Fast, time.Second) }},
		{"stall the network 1.5s", func() error {
			release := proxy.Stall()
			time.Sleep(1500 * time.Millisecond)
			release()
			return nil
		}},
		{"restart Postgres (immediate)", func() error { return pg.Restart(ctx, pgcluster.Immediate, time.Second) }},
		{"hold a submit's commit past its deadline", func() error {
			proxy.Inject(pgproxy.Fault{Statement: "JobSubmit", Action: pgproxy.StallCommit, Duration: 2500 * time.Millisecond})
			return nil
		}},
	}
	return runChecked(ctx, c, "postgres", client, func(i int) (string, error) {
		f := faults[i%len(faults)]
		return f.name, f.do()
	})
}

func runEmbedded(ctx context.Context, c config, bin, tmp string) (porcupine.CheckResult, error) {
	dir := filepath.Join(tmp, "embedded-data")
	addr, err := freeAddr()
	if err != nil {
		return "", err
	}
	args := []string{"serve", "--data-dir", dir, "--grpc-addr", addr, "--workers", "2", "--lease-duration", "2s",
		"--idempotency-window", c.window.String(), "--log-level", "warn"}
	logPath := filepath.Join(tmp, "embedded-serve.log")
	var mu sync.Mutex
	srv, err := startServer(bin, logPath, args...)
	if err != nil {
		return "", err
	}
	defer func() { mu.Lock(); srv.kill(syscall.SIGTERM); mu.Unlock() }()
	client, err := dial(ctx, addr)
	if err != nil {
		return "", err
	}
	return runChecked(ctx, c, "embedded", client, func(int) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		srv.kill(syscall.SIGKILL)
		if srv, err = startServer(bin, logPath, args...); err != nil {
			return "", err
		}
		return "SIGKILL and restart", nil
	})
}

// runChecked runs the load for c.duration with fault(i) every
// c.faultEvery, then checks the history.
func runChecked(ctx context.Context, c config, name string, client oncejobv1.JobServiceClient, fault func(i int) (string, error)) (porcupine.CheckResult, error) {
	fmt.Printf("%s: %s of %d clients over %d keys, window %s, a fault every %s\n", name, c.duration, c.load.Clients, c.load.Keys, c.window, c.faultEvery)
	runCtx, cancel := context.WithTimeout(ctx, c.duration)
	defer cancel()
	h := linearizability.NewHistory()
	var faultErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-runCtx.Done():
				return
			case <-time.After(c.faultEvery):
			}
			what, err := fault(i)
			if err != nil {
				faultErr = err
				cancel()
				return
			}
			fmt.Printf("  %6.1fs  %s\n", float64(time.Since(h.Start()))/float64(time.Second), what)
		}
	})
	load := c.load
	load.Prefix = fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
	errs := load.Run(runCtx, client, h)
	wg.Wait()
	if faultErr != nil {
		return "", faultErr
	}
	counts := h.Counts()
	fmt.Printf("  history: %d calls: %d created, %d existing, %d reused, %d found, %d not found, %d failed (%v)\n",
		len(h.Operations()), counts[linearizability.Created], counts[linearizability.Existing], counts[linearizability.Reused],
		counts[linearizability.Found], counts[linearizability.NotFound], counts[linearizability.Failed], errs.ByCode)
	start := time.Now()
	res, path, err := linearizability.Check(linearizability.Model(c.window), h.Operations(), c.checkLimit, func() string { return filepath.Join(c.out, name) })
	if err != nil {
		return "", err
	}
	fmt.Printf("  porcupine: %s in %s\n", res, time.Since(start).Round(time.Millisecond))
	if path != "" {
		fmt.Printf("  visualisation: %s\n", path)
	}
	return res, nil
}

func dial(ctx context.Context, addr string) (oncejobv1.JobServiceClient, error) {
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 300 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return oncejobv1.NewJobServiceClient(conn), nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, errors.New("the server never became healthy")
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
