package llmsim

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Running is a simulator serving on a listener of its own.
type Running struct {
	*Server
	// URL is the API base URL, "http://<addr>/v1": the value for
	// llm.Config.BaseURL.
	URL string
	// Addr is the address it listens on, host:port.
	Addr string

	http    *http.Server
	served  chan error
	stop    sync.Once
	stopErr error
}

// Start serves a simulator on addr ("" means 127.0.0.1 on a free port)
// until Close.
func Start(addr string, cfg Config) (*Running, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	// Start has no context: the listener lives until Close.
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &Running{
		Server: s,
		URL:    "http://" + ln.Addr().String() + "/v1",
		Addr:   ln.Addr().String(),
		http:   &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second},
		served: make(chan error, 1),
	}
	go func() { r.served <- r.http.Serve(ln) }()
	return r, nil
}

// Close drops held calls, stops serving and waits for the server to stop.
// Calling it again returns the first call's result.
func (r *Running) Close() error {
	r.stop.Do(func() { r.stopErr = r.shutdown() })
	return r.stopErr
}

func (r *Running) shutdown() error {
	r.Server.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.http.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, r.http.Close())
	}
	if serveErr := <-r.served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// Run serves a simulator on addr until ctx is done: the body of
// `oncejob llm-sim`. logger, when not nil, replaces cfg.Logger.
func Run(ctx context.Context, addr string, cfg Config, logger *slog.Logger) error {
	if logger != nil {
		cfg.Logger = logger
	}
	r, err := Start(addr, cfg)
	if err != nil {
		return err
	}
	r.log.Info("llm simulator listening", "url", r.URL, "lookup_path", LookupPath)
	select {
	case <-ctx.Done():
		return r.Close()
	case err := <-r.served:
		r.served <- err // Close reports it
		return r.Close()
	}
}
