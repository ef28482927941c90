package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/telemetry"
)

// telemetryOpts is --metrics-addr, and what the process tells its
// operators: Prometheus metrics, and traces when the OTEL_* variables ask
// for them (telemetry.StartTracing).
type telemetryOpts struct {
	metricsAddr string
}

func telemetryFlags(fs *flag.FlagSet, also string) *telemetryOpts {
	o := &telemetryOpts{}
	help := "address of a listener serving only GET /metrics (Prometheus); empty: none"
	if also != "" {
		help += " (" + also + ")"
	}
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", help)
	return o
}

// observability is a process's telemetry, running.
type observability struct {
	metrics *telemetry.Metrics
	tracing bool
	addr    string // where --metrics-addr listens; empty when off
	mux     *http.ServeMux
	srv     *http.Server
	stopTr  func(context.Context) error
}

// start makes the metrics, starts tracing from the environment and, when
// --metrics-addr is set, serves the metrics there.
func (o *telemetryOpts) start(ctx context.Context, service string, logger *slog.Logger) (*observability, error) {
	stopTr, tracing, err := telemetry.StartTracing(ctx, service)
	if err != nil {
		return nil, err
	}
	if tracing {
		logger.Info("tracing on: spans are exported as the OTEL_* variables say")
	}
	obs := &observability{metrics: telemetry.NewMetrics(), tracing: tracing, stopTr: stopTr}
	if o.metricsAddr == "" {
		return obs, nil
	}
	lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.metricsAddr)
	if err != nil {
		_ = stopTr(ctx)
		return nil, err
	}
	obs.mux = http.NewServeMux()
	obs.mux.Handle("GET /metrics", obs.metrics.Handler())
	obs.addr = lis.Addr().String()
	obs.srv = &http.Server{Handler: obs.mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := obs.srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server stopped", "error", err)
		}
	}()
	logger.Info("metrics served", "metrics_addr", obs.addr)
	return obs, nil
}

// mount adds routes to the --metrics-addr listener (a relay's /readyz);
// without one it does nothing.
func (obs *observability) mount(routes func(*http.ServeMux)) {
	if obs.mux != nil {
		routes(obs.mux)
	}
}

// stop closes the metrics listener and flushes the spans still buffered.
func (obs *observability) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if obs.srv != nil {
		_ = obs.srv.Shutdown(ctx)
	}
	_ = obs.stopTr(ctx)
}

// workerObserver measures and traces the engine, the provider named as the
// metrics' provider label.
func (obs *observability) workerObserver(provider string) *telemetry.WorkerObserver {
	return &telemetry.WorkerObserver{Metrics: obs.metrics, Provider: provider}
}

// relayObserver measures and traces the relay; a delivery's span joins its
// job's trace, read from st.
func (obs *observability) relayObserver(st store.Store) *telemetry.RelayObserver {
	return &telemetry.RelayObserver{
		Metrics: obs.metrics,
		Tracing: obs.tracing,
		Traceparent: func(ctx context.Context, tenant, jobID string) string {
			j, err := st.JobGetByID(ctx, &store.JobGetByIDParams{Tenant: tenant, ID: jobID})
			if err != nil {
				return ""
			}
			return j.Traceparent
		},
	}
}
