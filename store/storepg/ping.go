package storepg

import (
	"context"
)

// Ping implements store.Pinger: one round trip on a pooled connection, the
// same path every query takes (a pool that cannot connect fails it too).
func (s *Store) Ping(ctx context.Context) error {
	return interpretError(s.pool.Ping(ctx))
}

// PingWrite implements store.WritePinger with a transactional logical
// message: a WAL record in a transaction of its own, whose commit waits
// for the synchronous standbys as every job write's does, touching no
// table and needing no privilege. When ctx ends first, Postgres keeps the
// (empty) commit and pgx closes the connection.
func (s *Store) PingWrite(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, "SELECT pg_logical_emit_message(true, 'oncejob.readiness', '')")
	return interpretError(err)
}
