// Package readiness tells load balancers and orchestrators whether a server
// can do its work right now. A Probe pings the store periodically, and
// commits a write where it is given one to commit (Config.WritePinger); while the
// store does not answer, or answers but commits no write, the gRPC health status of the served services is
// NOT_SERVING and HTTP /readyz answers 503, and both come back by
// themselves once it answers again. Checks added with AddCheck (a relay
// that cannot claim) hold readiness down the same way while they fail, and
// /readyz names the failing one with its error. Liveness is apart: the overall health
// service ("") and /livez stay SERVING while the process runs, so an
// orchestrator takes the replica out of rotation during a database outage
// instead of restarting it, which would not bring the database back.
package readiness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/oncejob/oncejob/store"
)

// Config is what a Probe needs. Zero fields take the defaults stated.
type Config struct {
	// Store is pinged. Required.
	Store store.Pinger
	// Health, when set, gets the status of each of Services after every
	// check. Its overall service ("") is left alone: it is liveness.
	Health *health.Server
	// Services whose health follows readiness, e.g. "oncejob.v1.JobService".
	Services []string
	// Interval between checks; default 1s.
	Interval time.Duration
	// Timeout of one ping; default 1s. A store slower than this is not
	// ready: the calls it would serve would time out too.
	Timeout time.Duration
	// WritePinger, when set, commits one write at every check as well
	// (store.WritePinger: the Postgres store is one), so that a store that
	// answers reads but commits no write is not ready. Whoever chooses the
	// store sets it (cmd/oncejob); the probe never looks for it.
	WritePinger store.WritePinger
	// WriteTimeout bounds the commit of one write, with a WritePinger;
	// default 5s. A store that answers reads but commits
	// no write within it is not ready: with a lost synchronous standby
	// every write waits forever (docs/operations.md).
	WriteTimeout time.Duration
	// Logger receives the changes of readiness; default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Check is a part of the process that must work for it to be ready besides
// the store, e.g. the relay's claims (docs/operations.md, "Readiness").
type Check struct {
	// Name prefixes the error in /readyz and the log.
	Name string
	// Err returns nil while the part works, else why it does not. It must
	// be quick and must not block.
	Err func() error
}

// Probe checks the store and publishes the answer.
type Probe struct {
	cfg     Config
	ready   atomic.Bool
	reason  atomic.Pointer[string] // why not ready, for /readyz
	checkMu sync.Mutex
	checks  []Check
	signals TestSignals
}

// AddCheck adds a check to every following Check.
func (p *Probe) AddCheck(c Check) {
	p.checkMu.Lock()
	defer p.checkMu.Unlock()
	p.checks = append(p.checks, c)
}

// New returns a Probe that reports ready until its first check says
// otherwise (a server opens its store before it serves).
func New(cfg Config) (*Probe, error) {
	cfg = cfg.WithDefaults()
	if cfg.Store == nil {
		return nil, errors.New("readiness: Config.Store is required")
	}
	p := &Probe{cfg: cfg}
	p.ready.Store(true)
	return p, nil
}

// Run checks at once, then every Interval, until ctx is done.
func (p *Probe) Run(ctx context.Context) {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		_ = p.Check(ctx) // published; the log has the changes
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check pings the store once, commits a write where the store can, asks
// the added checks, publishes the result and returns the ping's or the
// write's error, or else the first failing check's.
func (p *Probe) Check(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	err := p.cfg.Store.Ping(pctx)
	cancel()
	reason := ""
	if err != nil {
		reason = "the job store does not answer"
	} else if p.cfg.WritePinger != nil {
		wctx, cancel := context.WithTimeout(ctx, p.cfg.WriteTimeout)
		err = p.cfg.WritePinger.PingWrite(wctx)
		cancel()
		if err != nil {
			reason = fmt.Sprintf("the job store answers but commits no write within %s (a synchronous standby that does not confirm? docs/operations.md)", p.cfg.WriteTimeout)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err() // shutting down: say nothing
	}
	if err == nil {
		if err = p.failingCheck(); err != nil {
			reason = err.Error()
		}
	}
	ready := err == nil
	old := p.reason.Swap(&reason)
	if p.ready.Swap(ready) != ready || (old != nil && *old != reason) {
		if ready {
			p.cfg.Logger.Info("readiness: ready again; serving")
		} else {
			p.cfg.Logger.Warn("readiness: not serving until this is resolved: "+reason, "error", err)
		}
	}
	if p.cfg.Health != nil {
		st := healthpb.HealthCheckResponse_SERVING
		if !ready {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		for _, s := range p.cfg.Services {
			p.cfg.Health.SetServingStatus(s, st) // ignored after Health.Shutdown
		}
	}
	p.signals.Checked.Signal(ready)
	return err
}

func (p *Probe) failingCheck() error {
	p.checkMu.Lock()
	checks := p.checks
	p.checkMu.Unlock()
	for _, c := range checks {
		if err := c.Err(); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	return nil
}

// Ready reports the last check's answer.
func (p *Probe) Ready() bool { return p.ready.Load() }

// ReadyzHandler answers 200 while the last check succeeded, else 503 with
// the reason.
func (p *Probe) ReadyzHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if !p.Ready() {
			reason := "the job store does not answer"
			if r := p.reason.Load(); r != nil && *r != "" {
				reason = *r
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready: " + reason + "\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
}

// LivezHandler answers 200 while the process serves HTTP at all.
func LivezHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte("ok\n"))
	})
}

// Mount registers GET /readyz and GET /livez on mux.
func (p *Probe) Mount(mux *http.ServeMux) {
	mux.Handle("GET /readyz", p.ReadyzHandler())
	mux.Handle("GET /livez", LivezHandler())
}
