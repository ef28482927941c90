// Package groupcommit gathers concurrent submissions into one store write.
//
// A submission waits at most Linger for others to join it, or less when the
// batch fills (MaxBatch); the batch is then written by one
// store.JobSubmitMany call (one statement on Postgres, one transaction on
// SQLite), and each caller is answered with its own submission's answer once
// that write has committed. A submission the store refuses fails alone. On
// a busy server the batch costs its members one commit instead of one each;
// a lone submission waits the linger and no more.
package groupcommit

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/testsignal"
)

// Defaults of Config.
const (
	DefaultLinger   = time.Millisecond
	DefaultMaxBatch = 128
	DefaultMaxBytes = 64 << 20
	DefaultTimeout  = 30 * time.Second
)

// Config configures a Batcher. Zero fields take the defaults stated.
type Config struct {
	// SubmitMany writes a batch. Required.
	SubmitMany func(ctx context.Context, params *store.JobSubmitManyParams) (*store.JobSubmitManyResult, error)
	// Linger is how long the first submission of a batch waits for others.
	// Default DefaultLinger (1ms); negative: none, every submission is
	// written at once, alone.
	Linger time.Duration
	// MaxBatch writes a batch as soon as it holds this many submissions.
	// Default DefaultMaxBatch (128).
	MaxBatch int
	// MaxBytes writes a batch as soon as its documents hold this many
	// bytes: Postgres refuses a statement whose parameters pass 1 GiB, and
	// 128 documents of the largest size a server may be set to accept
	// would. Default DefaultMaxBytes (64 MiB); a larger document goes
	// alone.
	MaxBytes int
	// Timeout bounds one batch's write, which no single caller's context
	// may cancel. Default DefaultTimeout (30s).
	Timeout time.Duration
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}

func (c Config) validate() error {
	if c.SubmitMany == nil {
		return errors.New("groupcommit: Config.SubmitMany is required")
	}
	if c.MaxBatch < 1 {
		return errors.New("groupcommit: Config.MaxBatch must be at least 1")
	}
	if c.MaxBytes < 1 {
		return errors.New("groupcommit: Config.MaxBytes must be at least 1")
	}
	if c.Timeout < 0 {
		return errors.New("groupcommit: Config.Timeout must not be negative")
	}
	return nil
}

// Batcher gathers submissions into batches. It is safe for concurrent use
// and needs no goroutine of its own: a batch is written by the caller that
// fills it, or by the timer of its first submission.
type Batcher struct {
	cfg Config

	mu      sync.Mutex
	pending []*call
	bytes   int // of the pending documents
	timer   *time.Timer
	batch   uint64 // counts batches taken, so a late timer takes none of a newer batch

	signals TestSignals
}

// TestSignals are the moments of a Batcher a test can wait for (see
// package testsignal); each is off until the test calls its Init.
type TestSignals struct {
	// Queued: a submission joined the batch being gathered; the value is
	// how many it then held, this one included.
	Queued testsignal.Signal[int]
}

// TestSignals returns the batcher's test signals.
func (b *Batcher) TestSignals() *TestSignals { return &b.signals }

// call is one submission waiting for its answer.
type call struct {
	ctx    context.Context
	params *store.JobSubmitParams
	item   store.JobSubmitItem
	err    error // the whole batch's
	done   chan struct{}
}

// New returns a Batcher.
func New(cfg Config) (*Batcher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Batcher{cfg: cfg}, nil
}

// Submit adds params to the next batch and returns its answer once the
// batch is written: as store.JobSubmit would answer it alone. A caller whose
// ctx ends first gets ctx's error; its submission is dropped if the batch
// was not written yet, and may be written otherwise (a retry with the same
// key then finds it).
func (b *Batcher) Submit(ctx context.Context, params *store.JobSubmitParams) (*store.JobSubmitResult, error) {
	c := &call{ctx: ctx, params: params, done: make(chan struct{})}
	if full := b.add(c); full != nil {
		b.write(full)
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if c.err != nil {
		return nil, c.err
	}
	if c.item.Err != nil {
		return nil, c.item.Err
	}
	return &store.JobSubmitResult{Job: c.item.Job, Outcome: c.item.Outcome}, nil
}

// add queues c and returns the batch if c filled it (or needs no linger).
func (b *Batcher) add(c *call) []*call {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending = append(b.pending, c)
	b.bytes += len(c.params.Document)
	b.signals.Queued.Signal(len(b.pending))
	if len(b.pending) >= b.cfg.MaxBatch || b.bytes >= b.cfg.MaxBytes || b.cfg.Linger < 0 {
		return b.take()
	}
	if len(b.pending) == 1 {
		batch := b.batch
		b.timer = time.AfterFunc(b.cfg.Linger, func() { b.lingered(batch) })
	}
	return nil
}

// lingered writes batch number n, unless it was taken already.
func (b *Batcher) lingered(n uint64) {
	b.mu.Lock()
	var batch []*call
	if b.batch == n {
		batch = b.take()
	}
	b.mu.Unlock()
	if len(batch) > 0 {
		b.write(batch)
	}
}

// take ends the pending batch and returns it; b.mu is held.
func (b *Batcher) take() []*call {
	batch := b.pending
	b.pending, b.bytes = nil, 0
	b.batch++
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	return batch
}

// write writes batch in one JobSubmitMany call and answers every caller.
// Callers already gone are left out.
func (b *Batcher) write(batch []*call) {
	live := make([]*call, 0, len(batch))
	params := &store.JobSubmitManyParams{Jobs: make([]*store.JobSubmitParams, 0, len(batch))}
	for _, c := range batch {
		if c.ctx.Err() != nil {
			close(c.done) // its caller has returned already
			continue
		}
		live = append(live, c)
		params.Jobs = append(params.Jobs, c.params)
	}
	if len(live) == 0 {
		return
	}
	// The write must not end with one caller's context; it keeps the first
	// caller's values (request id) for the store's logs.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), b.cfg.Timeout)
	defer cancel()
	res, err := b.cfg.SubmitMany(ctx, params)
	for i, c := range live {
		if err != nil {
			c.err = err
		} else {
			c.item = res.Items[i]
		}
		close(c.done)
	}
}
