package storesqlite

import (
	"context"
	"database/sql"
)

// writeTx is the write transaction a write runs in. It implements
// dbsqlite.DBTX, so the generated queries run on it, with every statement
// prepared once on the write connection and reused by every later
// transaction: SQLite spends more time parsing and planning a short
// statement than running it, and the writer runs the same few statements
// over and over. A statement a transaction meets for the first time is
// prepared in that transaction and, once it has ended, on the connection
// (the writer's, so only the writer touches the cache).
type writeTx struct {
	tx    *sql.Tx
	cache *stmtCache
	stmts map[string]*sql.Stmt // this transaction's handles, by query
}

// stmtCache holds the write connection's prepared statements.
type stmtCache struct {
	db       *sql.DB // one connection
	prepared map[string]*sql.Stmt
	wanted   []string // met in a transaction, to prepare once it ends
}

func (t *writeTx) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := t.stmts[query]; ok {
		return st, nil
	}
	var (
		st  *sql.Stmt
		err error
	)
	if parent, ok := t.cache.prepared[query]; ok {
		st = t.tx.StmtContext(ctx, parent) // reuses the connection's statement
	} else {
		st, err = t.tx.PrepareContext(ctx, query)
		t.cache.wanted = append(t.cache.wanted, query)
	}
	if err != nil {
		return nil, err
	}
	t.stmts[query] = st
	return st, nil
}

func (t *writeTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (t *writeTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (t *writeTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return t.tx.QueryRowContext(ctx, query, args...) // a Row carrying the same error
	}
	return st.QueryRowContext(ctx, args...)
}

func (t *writeTx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return t.stmt(ctx, query)
}

// prepareWanted prepares on the connection what the last transaction met
// for the first time. It runs between transactions, when the writer's one
// connection is free. A statement that fails to prepare is prepared in its
// transactions again, as before.
func (c *stmtCache) prepareWanted(ctx context.Context) {
	for _, query := range c.wanted {
		if _, ok := c.prepared[query]; ok {
			continue
		}
		if st, err := c.db.PrepareContext(ctx, query); err == nil {
			c.prepared[query] = st
		}
	}
	c.wanted = c.wanted[:0]
}

// close closes the connection's statements.
func (c *stmtCache) close() {
	for _, st := range c.prepared {
		_ = st.Close() // the connection closes next
	}
}
