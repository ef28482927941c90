package worker

import (
	"context"
	"time"

	"github.com/oncejob/oncejob/failpoint"
	"github.com/oncejob/oncejob/store"
)

// The completer publishes for every job of a worker: a job whose output is
// ready hands its publish over and waits; the completer writes what was
// handed over while its last write ran, and in the linger after the first
// of a batch, in one JobPublishMany call (one statement on Postgres, one
// transaction on SQLite), then answers each job with its own item. A job
// whose lease was taken over is refused alone; the others commit. So a busy
// worker pays one commit for many jobs instead of one each, as River's
// batched completer does (docs/architecture.md, "The batched engine").

// Defaults of Config's publishing fields.
const (
	PublishLingerDefault   = time.Millisecond
	PublishMaxBatchDefault = 256
)

// publishCall is one job's publish waiting for its answer.
type publishCall struct {
	params *store.JobPublishParams
	item   store.JobPublishItem
	err    error // the batch's
	done   chan struct{}
}

type completer struct {
	store    store.EngineStore
	linger   time.Duration
	maxBatch int
	calls    chan *publishCall
	stopped  chan struct{}
}

func newCompleter(st store.EngineStore, linger time.Duration, maxBatch int) *completer {
	c := &completer{
		store:    st,
		linger:   linger,
		maxBatch: maxBatch,
		calls:    make(chan *publishCall, maxBatch),
		stopped:  make(chan struct{}),
	}
	go c.run()
	return c
}

// publish hands params to the completer and returns its answer once the
// batch that carried it committed. It waits whatever ctx: a publish handed
// over may be written, and its job must know.
func (c *completer) publish(params *store.JobPublishParams) (*store.Job, error) {
	call := &publishCall{params: params, done: make(chan struct{})}
	c.calls <- call
	<-call.done
	if call.err != nil {
		return nil, call.err
	}
	return call.item.Job, call.item.Err
}

// close stops the completer once every publish handed over is answered.
// No publish may be handed over after it.
func (c *completer) close() {
	close(c.calls)
	<-c.stopped
}

func (c *completer) run() {
	defer close(c.stopped)
	batch := make([]*publishCall, 0, c.maxBatch)
	for {
		first, ok := <-c.calls
		if !ok {
			return
		}
		batch = append(batch[:0], first)
		batch = gather(c.calls, batch, c.linger, c.maxBatch)
		c.write(batch)
	}
}

// gather adds to batch what is queued on calls, and what comes within
// linger (none: what is queued now), up to maxBatch: the batch of a writer
// that takes what was handed over while its last write ran (the completer,
// the checkpoint writer).
func gather[T any](calls <-chan T, batch []T, linger time.Duration, maxBatch int) []T {
	var lingered <-chan time.Time
	if linger > 0 {
		t := time.NewTimer(linger)
		defer t.Stop()
		lingered = t.C
	}
	for len(batch) < maxBatch {
		select {
		case call, ok := <-calls:
			if !ok {
				return batch
			}
			batch = append(batch, call)
			continue
		default:
		}
		if lingered == nil {
			return batch
		}
		select {
		case call, ok := <-calls:
			if !ok {
				return batch
			}
			batch = append(batch, call)
		case <-lingered:
			return batch
		}
	}
	return batch
}

// write publishes batch in one call and answers every job of it.
func (c *completer) write(batch []*publishCall) {
	params := &store.JobPublishManyParams{Jobs: make([]*store.JobPublishParams, len(batch))}
	for i, call := range batch {
		params.Jobs[i] = call.params
	}
	// No job's context may end the batch's write.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.store.JobPublishMany(ctx, params)
	if err == nil {
		// The batch committed; no job has heard so yet. A crash here must
		// leave every job published once (tests/e2e's kill tests).
		failpoint.Inject(failpoint.PublishBatchInFlight)
	}
	for i, call := range batch {
		if err != nil {
			call.err = err
		} else {
			call.item = res.Items[i]
		}
		close(call.done)
	}
}
