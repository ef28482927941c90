package storesqlite

import (
	"context"
)

// Ping implements store.Pinger: a read connection of the probe's own runs
// a trivial statement (the driver's Ping), so a read pool kept busy by one
// tenant's pages does not make the probe wait and call the store not
// ready (docs/operations.md, Health). The embedded store lives in
// this process, so it answers unless it was closed or the disk failed.
func (s *Store) Ping(ctx context.Context) error {
	return interpretError(s.probe.PingContext(ctx))
}

// Connections returns how many read connections the store holds at most:
// the server's default per-tenant share of store calls is half of it.
func (s *Store) Connections() int { return s.read.Stats().MaxOpenConnections }
