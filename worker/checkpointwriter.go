package worker

import (
	"context"
	"time"

	"github.com/oncejob/oncejob/store"
)

// The checkpoint writer makes the post-call writes of every job of a
// worker, as the completer makes their publishes: a job whose flush is
// ready hands its CheckpointWriteMany over and waits; the writer writes what
// was handed over while its last write ran in one CheckpointWriteBatch call
// (one transaction: on Postgres each job's statement pipelined in one round
// trip, on SQLite a savepoint each), then answers each
// job with its own error. A job whose lease was taken over is refused alone
// (its journal row written all the same); the others commit. A job hears
// only once its write committed, so its journal row is durable before it
// goes on (docs/architecture.md, "The batched engine"). No linger: a
// worker's calls return spread out, and the writes queued behind the one
// running already make the batch (docs/performance.md, "The cost of a job
// (issue 33)").

// checkpointMaxBatch bounds a batch of the checkpoint writer;
// checkpointLinger is how long it waits for more after the first write of
// a batch: none (measured against 1 ms, docs/performance.md).
const (
	checkpointMaxBatch = 256
	checkpointLinger   = 0
)

// writeCall is one job's write waiting for its answer.
type writeCall struct {
	params   *store.CheckpointWriteManyParams
	deadline time.Time // the job's write timeout
	err      error
	done     chan struct{}
}

type checkpointWriter struct {
	store   store.CheckpointBatchWriter
	calls   chan *writeCall
	stopped chan struct{}
}

func newCheckpointWriter(st store.CheckpointBatchWriter) *checkpointWriter {
	w := &checkpointWriter{store: st, calls: make(chan *writeCall, checkpointMaxBatch), stopped: make(chan struct{})}
	go w.run()
	return w
}

// write hands params to the writer and returns its answer once the batch
// that carried it committed, or failed: at the latest the timeout of the
// batch's newest job after that one was handed over (writeBatch). It waits
// whatever the job's context: a write handed over may be made, and its job
// must know.
func (w *checkpointWriter) write(params *store.CheckpointWriteManyParams, timeout time.Duration) error {
	call := &writeCall{params: params, deadline: time.Now().Add(timeout), done: make(chan struct{})}
	w.calls <- call
	<-call.done
	return call.err
}

// close stops the writer once every write handed over is answered. No
// write may be handed over after it.
func (w *checkpointWriter) close() {
	close(w.calls)
	<-w.stopped
}

func (w *checkpointWriter) run() {
	defer close(w.stopped)
	batch := make([]*writeCall, 0, checkpointMaxBatch)
	for {
		first, ok := <-w.calls
		if !ok {
			return
		}
		batch = append(batch[:0], first)
		batch = gather(w.calls, batch, checkpointLinger, checkpointMaxBatch)
		w.writeBatch(batch)
	}
}

// writeBatch writes batch in one call and answers every job of it. A job
// whose deadline passed while it waited is answered so without being
// written. The call is bounded by the latest deadline of the others: a
// job handed over just now keeps its whole timeout whatever the others
// have left (by the earliest, a store back from a stall that takes longer
// than the oldest job has left would fail them all, the fresh ones
// ambiguously on Postgres). A job may so hear up to one timeout after its
// own deadline; its lease is heartbeated meanwhile, and the write is fenced
// by it whenever it lands.
func (w *checkpointWriter) writeBatch(batch []*writeCall) {
	now := time.Now()
	params := &store.CheckpointWriteBatchParams{Writes: make([]*store.CheckpointWriteManyParams, 0, len(batch))}
	calls := make([]*writeCall, 0, len(batch))
	var deadline time.Time
	for _, call := range batch {
		if !call.deadline.After(now) {
			call.err = context.DeadlineExceeded
			close(call.done)
			continue
		}
		if call.deadline.After(deadline) {
			deadline = call.deadline
		}
		params.Writes = append(params.Writes, call.params)
		calls = append(calls, call)
	}
	if len(calls) == 0 {
		return
	}
	// No job's context may end the batch's write.
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	res, err := w.store.CheckpointWriteBatch(ctx, params)
	for i, call := range calls {
		if err != nil {
			call.err = err
		} else {
			call.err = res.Errs[i]
		}
		close(call.done)
	}
}
