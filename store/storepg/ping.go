package storepg

import (
	"context"
)

// Ping implements store.Pinger: one round trip on a pooled connection, the
// same path every query takes (a pool that cannot connect fails it too).
func (s *Store) Ping(ctx context.Context) error {
	return interpretError(s.pool.Ping(ctx))
}
