package storepg

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// probePool is the readiness probe's own connection (a pool of one, so it
// reconnects by itself after an outage): a busy pool — one tenant's slow
// pages holding every connection for a while — must not make the probe
// wait for a connection and call a database that answers not ready
// (docs/operations.md, Health).
type probePool struct {
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

// get returns the probe's pool, made on first use from the store pool's
// configuration with one connection.
func (p *probePool) get(from *pgxpool.Pool) (*pgxpool.Pool, error) {
	p.once.Do(func() {
		cfg := from.Config()
		cfg.MaxConns, cfg.MinConns = 1, 0
		p.pool, p.err = pgxpool.NewWithConfig(context.Background(), cfg)
	})
	return p.pool, p.err
}

func (p *probePool) close() {
	p.once.Do(func() {}) // no pool made after Close
	if p.pool != nil {
		p.pool.Close()
	}
}

// Ping implements store.Pinger: one round trip on the probe's own
// connection, so it answers whether the database does, not whether the
// store's pool has a connection free (the server's per-tenant share of
// store calls keeps any one tenant from taking the pool).
func (s *Store) Ping(ctx context.Context) error {
	pool, err := s.probe.get(s.pool)
	if err != nil {
		return interpretError(err)
	}
	return interpretError(pool.Ping(ctx))
}

// PingWrite implements store.WritePinger with a transactional logical
// message on the probe's own connection: a WAL record in a transaction of
// its own, whose commit waits for the synchronous standbys as every job
// write's does, touching no table and needing no privilege. When ctx ends
// first, Postgres keeps the (empty) commit and pgx closes the connection.
func (s *Store) PingWrite(ctx context.Context) error {
	pool, err := s.probe.get(s.pool)
	if err != nil {
		return interpretError(err)
	}
	_, err = pool.Exec(ctx, "SELECT pg_logical_emit_message(true, 'oncejob.readiness', '')")
	return interpretError(err)
}

// Connections returns how many connections the store's pool holds at most:
// the server's default per-tenant share of store calls is half of it.
func (s *Store) Connections() int { return int(s.pool.Config().MaxConns) }
