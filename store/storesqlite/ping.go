package storesqlite

import (
	"context"
)

// Ping implements store.Pinger: a read connection runs a trivial statement
// (the driver's Ping). The embedded store lives in this process, so it
// answers unless it was closed or the disk failed.
func (s *Store) Ping(ctx context.Context) error {
	return interpretError(s.read.PingContext(ctx))
}
