// Package worker is oncejob's engine: it claims jobs under leases from the
// work log, runs their stages with a checkpoint after each, retries inside a
// budget, and publishes through the outbox. Any number of workers, in any
// number of processes, run against one store: leases and fencing keep each
// effect to one.
package worker

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"text/template"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/llm/pace"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/retry"
	"github.com/oncejob/oncejob/store"
)

// Store is what a worker needs of the store.
type Store interface {
	store.Store
	store.EngineStore
	// The batcher keeps what it sees of each provider batch, and the lines
	// each billed, and reads the jobs of a batch's lines before it cancels
	// it (of store.ProviderBatchStore).
	ProviderBatchRecord(ctx context.Context, params *store.ProviderBatchRecordParams) error
	ProviderBatchBillsRecord(ctx context.Context, params *store.ProviderBatchBillsRecordParams) error
	ProviderBatchListStale(ctx context.Context, params *store.ProviderBatchListStaleParams) ([]*store.ProviderBatch, error)
	ProviderBatchJobs(ctx context.Context, params *store.ProviderBatchJobsParams) ([]*store.ProviderBatchJob, error)
	// The pacer draws every online call from the provider limits.
	store.ProviderLimitStore
}

// Defaults of Config, used by WithDefaults and by the command's flags.
const (
	LeaseDurationDefault      = 30 * time.Second
	PollIntervalDefault       = 200 * time.Millisecond
	ProviderBatchSweepDefault = time.Minute
)

// ConcurrencyDefault is the default of Config.Concurrency. A job spends
// nearly all its time waiting on its LLM calls (seconds each), on a
// goroutine that costs a few KiB, so a worker process keeps a real provider
// busy only with thousands of jobs in flight; the store's work per job is
// batched (claims, heartbeats, publishes), so they cost few connections.
func ConcurrencyDefault() int { return 2000 }

// Config configures a Worker. Zero fields take the defaults stated.
type Config struct {
	// Store is the work log. Required.
	Store Store
	// Provider generates. Required.
	Provider llm.Provider
	// Pipelines the jobs name. Default: pipeline.Builtin().
	Pipelines *pipeline.Registry
	// Owner names this worker in leases. Two workers must never share one.
	// Default: host-pid-random.
	Owner string
	// Concurrency is how many jobs run at once. Default:
	// ConcurrencyDefault().
	Concurrency int
	// LeaseDuration is how long a claim holds without a heartbeat; a worker
	// that dies is taken over after it. Default: LeaseDurationDefault.
	LeaseDuration time.Duration
	// HeartbeatInterval is how often a running job's lease is extended.
	// Default: LeaseDuration/3.
	HeartbeatInterval time.Duration
	// PollInterval is the wait between claims when the queue is empty,
	// jittered. Default: PollIntervalDefault.
	PollInterval time.Duration
	// PublishLinger is how long the completer waits after a job's publish
	// for others to join its batch (see completer.go). Default:
	// PublishLingerDefault; negative: no wait, a batch is what was queued.
	PublishLinger time.Duration
	// PublishMaxBatch bounds the jobs one publish write carries. Default:
	// PublishMaxBatchDefault.
	PublishMaxBatch int
	// ProviderBatchSweep is how often a follower of a provider batch
	// touches its record, and how often the batcher looks for batches
	// whose record nobody touched for three of these (their follower is
	// gone) to follow them to their end and record their bills. Default:
	// ProviderBatchSweepDefault.
	ProviderBatchSweep time.Duration
	// Logger. Default: slog.Default().
	Logger *slog.Logger
	// Observer is told of claims, stages and LLM calls (metrics, traces).
	// Default: none.
	Observer Observer
	// Pacer keeps the online calls inside the provider limits. Default: one
	// of this worker's, over Store, with the limits of Pipelines; Run
	// closes it.
	Pacer *pace.Pacer
	// Now is the clock due times are computed on: a retry's backoff, the
	// reconciler's next look-up. Claims and heartbeats run on the
	// database's clock, shared by every process. Default: time.Now.
	Now func() time.Time
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Pipelines == nil {
		c.Pipelines = pipeline.Builtin()
	}
	if c.Owner == "" {
		host, _ := os.Hostname()
		b := make([]byte, 4)
		_, _ = crand.Read(b)
		c.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
	}
	if c.Concurrency == 0 {
		c.Concurrency = ConcurrencyDefault()
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = LeaseDurationDefault
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = c.LeaseDuration / 3
	}
	if c.PollInterval == 0 {
		c.PollInterval = PollIntervalDefault
	}
	if c.PublishLinger == 0 {
		c.PublishLinger = PublishLingerDefault
	}
	if c.PublishMaxBatch == 0 {
		c.PublishMaxBatch = PublishMaxBatchDefault
	}
	if c.ProviderBatchSweep <= 0 {
		c.ProviderBatchSweep = ProviderBatchSweepDefault
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Store == nil:
		return errors.New("worker: Config.Store is required")
	case c.Provider == nil:
		return errors.New("worker: Config.Provider is required")
	case c.Concurrency < 1:
		return errors.New("worker: Config.Concurrency must be positive")
	case c.HeartbeatInterval >= c.LeaseDuration:
		return errors.New("worker: HeartbeatInterval must be shorter than LeaseDuration")
	case c.PublishMaxBatch < 1:
		return errors.New("worker: Config.PublishMaxBatch must be positive")
	}
	return nil
}

// Worker claims and runs jobs.
type Worker struct {
	cfg Config
	log *slog.Logger

	signals TestSignals

	// Set while Run runs.
	completer   *completer
	ckWriter    *checkpointWriter // nil: each job writes its own (the store batches none)
	heartbeater *heartbeater
	batcher     *batcher // nil when the provider has no batch API
	pacer       *pace.Pacer
	ownPacer    bool // made by New, closed by Run

	mu        sync.Mutex
	schemas   map[string]*jsonschema.Schema // by schema hash
	templates map[string]*template.Template // by pipeline name and version
}

// New returns a Worker.
func New(cfg Config) (*Worker, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if profiles := cfg.Pipelines.BatchProfiles(); len(profiles) > 0 {
		if _, err := llm.BatchesOf(cfg.Provider); err != nil {
			return nil, fmt.Errorf("worker: model profile %q has provider_batch: %w", profiles[0], err)
		}
	}
	w := &Worker{
		cfg:       cfg,
		log:       cfg.Logger.With("worker", cfg.Owner),
		schemas:   map[string]*jsonschema.Schema{},
		templates: map[string]*template.Template{},
		pacer:     cfg.Pacer,
	}
	if w.pacer == nil {
		p, err := NewPacer(cfg.Store, cfg.Owner, cfg.Pipelines, cfg.Logger)
		if err != nil {
			return nil, err
		}
		w.pacer, w.ownPacer = p, true
	}
	return w, nil
}

// NewPacer returns a pacer of the provider limits of pipelines
// (pipeline.Registry.ProviderLimits), drawing from st as holder.
func NewPacer(st store.ProviderLimitStore, holder string, pipelines *pipeline.Registry, logger *slog.Logger) (*pace.Pacer, error) {
	limits := map[string]pace.Limit{}
	for name, l := range pipelines.ProviderLimits() {
		limits[name] = pace.Limit{RequestsPerMinute: l.RequestsPerMinute, TokensPerMinute: l.TokensPerMinute, CallsInFlight: l.CallsInFlight}
	}
	return pace.New(pace.Config{Store: st, Holder: holder, Limits: limits, TenantWeights: pipelines.TenantWeights(), Logger: logger})
}

// Pacer is the pacer of the worker's online calls.
func (w *Worker) Pacer() *pace.Pacer { return w.pacer }

// Owner is the name this worker takes leases under.
func (w *Worker) Owner() string { return w.cfg.Owner }

// startWriters starts the completer and, when the store batches
// post-call writes, the checkpoint writer.
func (w *Worker) startWriters() {
	w.completer = newCompleter(w.cfg.Store, max(w.cfg.PublishLinger, 0), w.cfg.PublishMaxBatch)
	if bw, ok := w.cfg.Store.(store.CheckpointBatchWriter); ok {
		w.ckWriter = newCheckpointWriter(bw)
	}
}

// stopWriters answers what was handed to the writers and ends their
// goroutines.
func (w *Worker) stopWriters() {
	w.completer.close()
	if w.ckWriter != nil {
		w.ckWriter.close()
	}
}

// Run claims and runs jobs until ctx is done, then waits for the jobs it
// runs to stop. A job interrupted by the shutdown goes back to the queue
// (RETRY_WAIT, due at once).
func (w *Worker) Run(ctx context.Context) error {
	w.startWriters()
	w.heartbeater = newHeartbeater(w)
	var err error
	if w.batcher, err = newBatcher(w, ctx); err != nil {
		w.stopWriters() // nothing ran
		return err
	}
	beatCtx, stopBeats := context.WithCancel(context.WithoutCancel(ctx))
	beatsDone := make(chan struct{})
	go func() { defer close(beatsDone); w.heartbeater.run(beatCtx) }()

	slots := make(chan struct{}, w.cfg.Concurrency)
	freed := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer func() {
		// The jobs settle first: they may still publish and need their
		// leases beaten until they have.
		wg.Wait()
		w.stopWriters()
		stopBeats()
		<-beatsDone
		if w.ownPacer {
			w.pacer.Close()
		}
	}()
	failedClaims := 0 // in a row: the store is down or unreachable
	for {
		free := cap(slots) - len(slots)
		var claimed int
		if free > 0 {
			jobs := w.claim(ctx, free, &failedClaims)
			claimed = len(jobs)
			if claimed > 0 {
				w.signals.Claimed.Signal(jobIDs(jobs))
			}
			for _, j := range jobs {
				slots <- struct{}{}
				wg.Add(1)
				go func() {
					defer func() {
						<-slots
						select {
						case freed <- struct{}{}:
						default:
						}
						wg.Done()
					}()
					w.work(ctx, j)
				}()
			}
		}
		if free == 0 || claimed == free {
			// The queue may hold more: claim again as soon as a slot frees.
			select {
			case <-ctx.Done():
				return nil
			case <-freed:
			}
			continue
		}
		wait := w.cfg.PollInterval/2 + time.Duration(rand.Int64N(int64(w.cfg.PollInterval)/2+1))
		if failedClaims > 0 {
			wait = claimBackoff(w.cfg.PollInterval, failedClaims)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// claim claims up to free jobs. failedClaims counts the claims that failed
// in a row (the store is down or unreachable): logged once per outage, and
// the poll backs off by it.
func (w *Worker) claim(ctx context.Context, free int, failedClaims *int) []*store.JobWork {
	jobs, err := w.cfg.Store.JobClaimWork(ctx, &store.JobClaimParams{
		Owner:         w.cfg.Owner,
		Limit:         free,
		LeaseDuration: w.cfg.LeaseDuration,
	})
	switch {
	case err != nil && ctx.Err() == nil:
		*failedClaims++
		if *failedClaims == 1 { // once per outage, not once per poll
			w.log.Error("claim failed; backing off until the store answers", "error", err)
		}
	case err == nil && *failedClaims > 0:
		w.log.Info("claims work again", "failed_claims", *failedClaims)
		*failedClaims = 0
	}
	return jobs
}

// maxClaimBackoff caps the wait between failing claims: short enough that
// the workers are back soon after the store.
const maxClaimBackoff = 2 * time.Second

// claimBackoff is the wait after failures failed claims in a row:
// exponential from twice the poll interval, full jitter, so that the
// workers of every process do not return to a recovering database in step.
func claimBackoff(poll time.Duration, failures int) time.Duration {
	return retry.Backoff{Initial: 2 * poll, Max: maxClaimBackoff, Multiplier: 2}.Wait(failures, retry.Jitter())
}

func jobIDs(jobs []*store.JobWork) []string {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.Job.ID
	}
	return ids
}
