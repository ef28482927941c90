package storesqlite

import (
	"context"
	"database/sql"
	"sync"

	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// readDB is the read pool with its statements prepared once: SQLite
// parses and plans a statement at every prepare, and database/sql's
// QueryContext on a *sql.DB prepares, runs and finalizes the statement
// each time. A *sql.Stmt of the pool is prepared again on each connection
// it first runs on and kept there, so every read after the first on a
// connection skips the parser (under a WatchJob's event reads the parser
// was a fifth of the CPU). The writer keeps statements of its own
// (stmtCache).
type readDB struct {
	*sql.DB
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

// maxReadStmts bounds the statements kept: a query with a slice parameter
// has a text per slice length, which would otherwise grow the map without
// end. Past the bound a query runs unprepared, as database/sql runs it.
const maxReadStmts = 256

func newReadDB(db *sql.DB) *readDB {
	return &readDB{DB: db, stmts: make(map[string]*sql.Stmt)}
}

// stmt returns the pool's statement for query, preparing it on the first
// call, or nil past maxReadStmts.
// The lock is not held while preparing: a prepare may wait for a
// connection of the pool, and a transaction holding one may be waiting
// for the lock (readTx.QueryContext).
func (r *readDB) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	r.mu.Lock()
	st, ok := r.stmts[query]
	full := len(r.stmts) >= maxReadStmts
	r.mu.Unlock()
	if ok || full {
		return st, nil
	}
	st, err := r.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.stmts[query]; ok { // prepared meanwhile by another read
		_ = st.Close()
		return prev, nil
	}
	r.stmts[query] = st
	return st, nil
}

func (r *readDB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := r.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return r.DB.QueryContext(ctx, query, args...)
	}
	return st.QueryContext(ctx, args...)
}

func (r *readDB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := r.stmt(ctx, query)
	if err != nil || st == nil {
		// A failed prepare is reported by the row's Scan, as database/sql
		// reports it.
		return r.DB.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// Close closes the statements, then the pool.
func (r *readDB) Close() error {
	r.mu.Lock()
	for q, st := range r.stmts {
		_ = st.Close()
		delete(r.stmts, q)
	}
	r.mu.Unlock()
	return r.DB.Close()
}

// cached returns query's statement if one was prepared, or nil.
func (r *readDB) cached(query string) *sql.Stmt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stmts[query]
}

// beginRead starts a read-only transaction whose reads use the pool's
// statements; end it with end.
func (r *readDB) beginRead(ctx context.Context) (*readTx, error) {
	tx, err := r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	return &readTx{Tx: tx, r: r}, nil
}

// snapshot runs read in a read-only transaction of the pool
// (rowmap.Handle.Snapshot).
func (r *readDB) snapshot(ctx context.Context, read func(dbsqlite.DBTX) error) error {
	tx, err := r.beginRead(ctx)
	if err != nil {
		return interpretError(err)
	}
	defer tx.end(ctx)
	return read(tx)
}

// readTx is a read-only transaction of the pool. A query with a prepared
// statement runs it on the transaction's connection; one without runs
// unprepared and is prepared once the transaction has ended. Preparing
// while the transaction holds its connection would take a second one from
// the pool, and transactions that each wait for a second connection of a
// full pool would wait for each other.
type readTx struct {
	*sql.Tx
	r      *readDB
	wanted []string
}

func (t *readTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := t.r.cached(query); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	t.wanted = append(t.wanted, query)
	return t.Tx.QueryContext(ctx, query, args...)
}

func (t *readTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.r.cached(query); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	t.wanted = append(t.wanted, query)
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// end rolls the transaction back (it wrote nothing) and prepares the
// statements it ran unprepared.
func (t *readTx) end(ctx context.Context) {
	_ = t.Rollback()
	for _, q := range t.wanted {
		_, _ = t.r.stmt(context.WithoutCancel(ctx), q) // a failure leaves the query unprepared
	}
}
