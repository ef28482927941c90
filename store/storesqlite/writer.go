package storesqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// The single writer commits what is queued in one transaction (group
// commit). With synchronous=FULL every commit waits for an fsync of the
// WAL, and the fsync, not the statements, bounds how many transactions a
// second SQLite makes; so the writer takes every write queued while the
// previous transaction committed and runs them all in one BEGIN IMMEDIATE
// ... COMMIT, each in a SAVEPOINT of its own. A write that fails rolls back
// to its savepoint alone, and the others commit; every caller is answered
// after the COMMIT returned, so an answered write is on disk. A lone write
// is a transaction of one, as before; under load one fsync carries many.
// See docs/architecture.md, "The embedded store's single writer".

// maxWriteBatch bounds the writes one transaction runs, so a queue that
// never empties still commits, and answers, regularly.
const maxWriteBatch = 1024

// Savepoint statements: transaction control, not queries (sqlc parses
// neither), so they live here rather than in dbsqlite.
const (
	sqlSavepoint         = "SAVEPOINT write_op"
	sqlRollbackSavepoint = "ROLLBACK TO write_op"
	sqlReleaseSavepoint  = "RELEASE write_op"
)

var errClosed = errors.New("storesqlite: the store is closed")

// writeFunc is one write: statements on tx, stamped now. Its ctx is the
// caller's without its cancellation: once a write runs it runs to its end,
// since interrupting a statement would roll back the whole transaction,
// the other callers' writes with it.
type writeFunc func(ctx context.Context, tx *writeTx, now int64) error

// writeOp is a queued write and, once done is closed, its answer.
type writeOp struct {
	ctx   context.Context
	fn    writeFunc
	state atomic.Int32
	err   error
	done  chan struct{}
}

// States of a writeOp: the writer moves it from queued to running, or its
// caller, gone before that, to withdrawn, and the writer skips it.
const (
	opQueued int32 = iota
	opRunning
	opWithdrawn
)

// writer owns the write connection. Its goroutine runs every write.
type writer struct {
	db    *sql.DB // one connection
	stmts stmtCache
	clock *clock
	// appended is set by jobEventAppend in the write running now, and taken
	// by the writer after each write; wake wakes the store's listeners once
	// a transaction that appended events has committed.
	appended *atomic.Bool
	wake     func()

	mu      sync.RWMutex // closed and sends on ops
	closed  bool
	ops     chan *writeOp
	stopped chan struct{}

	// commits counts committed transactions, for tests.
	commits atomic.Int64
}

func newWriter(db *sql.DB, c *clock, appended *atomic.Bool, wake func()) *writer {
	w := &writer{
		db:       db,
		stmts:    stmtCache{db: db, prepared: make(map[string]*sql.Stmt)},
		clock:    c,
		appended: appended,
		wake:     wake,
		ops:      make(chan *writeOp, maxWriteBatch),
		stopped:  make(chan struct{}),
	}
	go w.run()
	return w
}

// write queues fn and waits for its answer, which comes after the
// transaction that ran it committed (nil), or rolled it back (its error).
// A caller whose ctx ends before its write ran gets ctx's error and the
// write never runs; once it runs, its answer is awaited whatever the ctx.
func (w *writer) write(ctx context.Context, fn writeFunc) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	op := &writeOp{ctx: ctx, fn: fn, done: make(chan struct{})}
	if err := w.enqueue(ctx, op); err != nil {
		return err
	}
	select {
	case <-op.done:
		return op.err
	case <-ctx.Done():
		if op.state.CompareAndSwap(opQueued, opWithdrawn) {
			return ctx.Err()
		}
		<-op.done
		return op.err
	}
}

func (w *writer) enqueue(ctx context.Context, op *writeOp) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return errClosed
	}
	select {
	case w.ops <- op:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close runs what is queued, stops the writer and waits for it.
func (w *writer) close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.ops)
	}
	w.mu.Unlock()
	<-w.stopped
}

func (w *writer) run() {
	defer close(w.stopped)
	defer w.stmts.close()
	batch := make([]*writeOp, 0, maxWriteBatch)
	for {
		op, ok := <-w.ops
		if !ok {
			return
		}
		batch = append(batch[:0], op)
	more:
		for len(batch) < maxWriteBatch {
			select {
			case op, ok := <-w.ops:
				if !ok {
					break more
				}
				batch = append(batch, op)
			default:
				break more
			}
		}
		w.commit(batch)
		w.stmts.prepareWanted(context.Background())
	}
}

// commit runs batch in one transaction and answers every write in it.
func (w *writer) commit(batch []*writeOp) {
	ctx := context.Background() // no caller's cancellation may end the transaction
	sqlTx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		w.answerAll(batch, interpretError(err))
		return
	}
	tx := &writeTx{tx: sqlTx, cache: &w.stmts, stmts: make(map[string]*sql.Stmt)}
	var ran []*writeOp
	appended := false
	for i, op := range batch {
		if !op.state.CompareAndSwap(opQueued, opRunning) {
			continue // withdrawn: its caller left before it ran
		}
		opAppended, err := w.runOne(ctx, tx, op)
		ran = append(ran, op)
		if err != nil {
			// The savepoint could not be set, undone or released: the
			// transaction is not usable. Every write it ran is lost (none
			// was answered); the ones it did not reach get one of their own.
			_ = sqlTx.Rollback()
			w.answerAll(ran, fmt.Errorf("storesqlite: write transaction: %w", interpretError(err)))
			w.requeue(batch[i+1:])
			return
		}
		appended = appended || opAppended
	}
	if err := sqlTx.Commit(); err != nil {
		for _, op := range ran {
			if op.err == nil {
				op.err = interpretError(err)
			}
		}
	} else {
		w.commits.Add(1)
		if appended {
			w.wake()
		}
	}
	for _, op := range ran {
		close(op.done)
	}
}

// runOne runs op in a savepoint of its own and keeps its error in op.err;
// the error returned is the savepoint's, which ends the transaction.
func (w *writer) runOne(ctx context.Context, tx *writeTx, op *writeOp) (appended bool, err error) {
	if _, err := tx.ExecContext(ctx, sqlSavepoint); err != nil {
		return false, err
	}
	op.err = runWrite(op, tx, w.clock.now())
	// Taken while this write still holds the writer, so the flag is this
	// write's, whatever happens next.
	appended = w.appended.Swap(false)
	if op.err != nil {
		appended = false
		if _, err := tx.ExecContext(ctx, sqlRollbackSavepoint); err != nil {
			return false, err
		}
	}
	if _, err := tx.ExecContext(ctx, sqlReleaseSavepoint); err != nil {
		return false, err
	}
	return appended, nil
}

// runWrite runs op's function; a panic in it fails that write alone, as
// it would have failed its caller alone before writes were queued.
func runWrite(op *writeOp, tx *writeTx, now int64) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("storesqlite: write panicked: %v", r)
		}
	}()
	return op.fn(context.WithoutCancel(op.ctx), tx, now)
}

// requeue runs the writes a failed transaction did not reach, in a
// transaction of their own.
func (w *writer) requeue(rest []*writeOp) {
	if len(rest) > 0 {
		w.commit(rest)
	}
}

// answerAll answers every write of ops that was not withdrawn with err.
func (w *writer) answerAll(ops []*writeOp, err error) {
	for _, op := range ops {
		if op.state.Load() != opRunning && !op.state.CompareAndSwap(opQueued, opRunning) {
			continue // withdrawn: nobody waits
		}
		op.err = err
		close(op.done)
	}
}
