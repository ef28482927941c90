package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/llmsim"
	"github.com/oncejob/oncejob/llm/pace"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/telemetry"
	"github.com/oncejob/oncejob/worker"
)

// engineOpts are the flags of the commands that run workers (serve, worker).
type engineOpts struct {
	// pacer is the running workers' pacer, once they started.
	pacer atomic.Pointer[pace.Pacer]

	pipelinesPath string
	workers       int
	llmBaseURL    string
	llmAPIKey     string
	llmTimeout    time.Duration
	llmLookupPath string
	llmBatchAPI   bool
	leaseDuration time.Duration
	pollInterval  time.Duration
	publishLinger time.Duration
	publishBatch  int
	batchSweep    time.Duration
	minWorkers    int // the least --workers the command takes
}

// engineFlags declares the engine's flags; the command runs with at least
// minWorkers workers (serve: 0, worker: 1).
func engineFlags(fs *flag.FlagSet, minWorkers int) *engineOpts {
	o := &engineOpts{minWorkers: minWorkers}
	fs.StringVar(&o.pipelinesPath, "pipelines", "", "YAML file of pipelines, added to the built-in ones")
	fs.IntVar(&o.workers, "workers", worker.ConcurrencyDefault(), "jobs run at once by this process (0: none)")
	fs.StringVar(&o.llmBaseURL, "llm-base-url", "", "OpenAI-compatible API base URL, e.g. https://api.openai.com/v1; empty: the built-in simulator on loopback")
	fs.StringVar(&o.llmAPIKey, "llm-api-key", "", "API key of the LLM provider (prefer ONCEJOB_LLM_API_KEY)")
	fs.DurationVar(&o.llmTimeout, "llm-timeout", llm.TimeoutDefault, "client timeout of one LLM call; a timeout after sending is an unknown outcome")
	fs.StringVar(&o.llmLookupPath, "llm-lookup-path", "", "path under --llm-base-url to look a call up by provider key (GET <path>/<key>); empty: the provider has none, and an unknown outcome waits for ResolveJob")
	fs.BoolVar(&o.llmBatchAPI, "llm-batch-api", false, "the provider serves OpenAI's Files and Batches endpoints under --llm-base-url (OpenAI does; vLLM, llama.cpp and Ollama do not): needed by model profiles with provider_batch; the built-in simulator has them")
	fs.DurationVar(&o.leaseDuration, "lease-duration", worker.LeaseDurationDefault, "how long a claim holds without a heartbeat (heartbeats every third of it)")
	fs.DurationVar(&o.pollInterval, "poll-interval", worker.PollIntervalDefault, "wait between claims when the queue is empty")
	fs.DurationVar(&o.publishLinger, "publish-linger", worker.PublishLingerDefault, "how long a finished job waits for others to share its publishing commit (negative: no wait)")
	fs.IntVar(&o.publishBatch, "publish-max-batch", worker.PublishMaxBatchDefault, "most jobs published in one commit")
	fs.DurationVar(&o.batchSweep, "provider-batch-sweep", worker.ProviderBatchSweepDefault, "how often a provider batch's follower touches its record, and how often batches nobody followed for three of these are followed to their end (their bills recorded)")
	return o
}

// validate checks the flags once, before anything starts.
func (o *engineOpts) validate() error {
	switch {
	case o.workers >= o.minWorkers:
		return nil
	case o.minWorkers == 0:
		return errors.New("--workers must not be negative")
	}
	return fmt.Errorf("--workers must be at least %d", o.minWorkers)
}

// provider returns the configured provider, or starts the simulator on
// loopback when none is configured. stop releases what it started.
func (o *engineOpts) provider(logger *slog.Logger) (llm.Provider, func(), error) {
	baseURL, lookupPath, batches, stop := o.llmBaseURL, o.llmLookupPath, o.llmBatchAPI, func() {}
	if baseURL == "" {
		sim, err := llmsim.Start("127.0.0.1:0", llmsim.Config{Logger: logger})
		if err != nil {
			return nil, nil, fmt.Errorf("start the LLM simulator: %w", err)
		}
		baseURL, lookupPath, batches, stop = sim.URL, llmsim.LookupPath, true, func() { _ = sim.Close() }
		logger.Info("no --llm-base-url: using the built-in LLM simulator", "url", sim.URL)
	}
	// Every worker calls the one provider host. net/http keeps 2 idle
	// connections per host by default: after a burst of calls all but two
	// are closed and the next calls dial again (a TCP handshake, or a TLS
	// one, per call). Keep as many as jobs run at once.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = max(o.workers, 2)
	transport.MaxIdleConns = max(o.workers, transport.MaxIdleConns)
	p, err := llm.NewOpenAI(llm.Config{
		BaseURL: baseURL, APIKey: o.llmAPIKey, Timeout: o.llmTimeout, LookupPath: lookupPath, Batches: batches,
		HTTPClient: &http.Client{Transport: transport},
	})
	if err != nil {
		stop()
		return nil, nil, err
	}
	return p, stop, nil
}

// hasBatchAPI says whether the provider has a batch API: the one at
// --llm-base-url when --llm-batch-api says so, the built-in simulator
// always.
func (o *engineOpts) hasBatchAPI() bool { return o.llmBaseURL == "" || o.llmBatchAPI }

// providerName is the LLM provider in the metrics' provider label: the
// host of --llm-base-url, or "llmsim" for the built-in simulator.
func (o *engineOpts) providerName() string {
	if o.llmBaseURL == "" {
		return "llmsim"
	}
	if u, err := url.Parse(o.llmBaseURL); err == nil && u.Host != "" {
		return u.Host
	}
	return o.llmBaseURL
}

// startWorkers runs the engine in the background until ctx is done; wait
// blocks until it stopped. The flags are valid (validate).
func (o *engineOpts) startWorkers(ctx context.Context, st worker.Store, pipelines *pipeline.Registry, obs *observability, logger *slog.Logger) (wait func(), err error) {
	if o.workers == 0 {
		return func() {}, nil
	}
	provider, stopProvider, err := o.provider(logger)
	if err != nil {
		return nil, err
	}
	w, err := worker.New(worker.Config{
		Store:              st,
		Provider:           provider,
		Pipelines:          pipelines,
		Concurrency:        o.workers,
		LeaseDuration:      o.leaseDuration,
		PollInterval:       o.pollInterval,
		PublishLinger:      o.publishLinger,
		PublishMaxBatch:    o.publishBatch,
		ProviderBatchSweep: o.batchSweep,
		Logger:             logger,
		Observer:           obs.workerObserver(o.providerName()),
	})
	if err != nil {
		stopProvider()
		return nil, err
	}
	obs.metrics.Register(telemetry.LimitsCollector{Stats: w.Pacer().Stats})
	o.pacer.Store(w.Pacer())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer stopProvider()
		_ = w.Run(ctx)
	}()
	logger.Info("workers running", "owner", w.Owner(), "concurrency", o.workers)
	return wg.Wait, nil
}

// limitUse is a provider limit's pace and use as the running workers see
// it (server.Config.ProviderLimitUse); nil before they drew from it.
func (o *engineOpts) limitUse(name string) *oncejobv1.ProviderLimitUse {
	p := o.pacer.Load()
	if p == nil {
		return nil
	}
	for _, st := range p.Stats() {
		if st.Limit != name {
			continue
		}
		use := &oncejobv1.ProviderLimitUse{
			RequestsPerMinute: st.Effective.RequestsPerMinute, TokensPerMinute: st.Effective.TokensPerMinute,
			CallsInFlightLimit: int32(st.Effective.CallsInFlight), CallsInFlight: int32(st.CallsInFlight),
			WaitingCalls: int32(st.Waiting), GrantedCalls: st.Granted, RateLimitedCalls: st.RateLimited,
		}
		if st.PausedUntil.After(time.Now()) {
			use.PausedUntil = timestamppb.New(st.PausedUntil)
		}
		return use
	}
	return nil
}

// pipelines returns the built-in pipelines, with those of the --pipelines
// file added when it is set.
func (o *engineOpts) pipelines() (*pipeline.Registry, error) {
	if o.pipelinesPath == "" {
		return pipeline.Builtin(), nil
	}
	return pipeline.Load(o.pipelinesPath)
}
