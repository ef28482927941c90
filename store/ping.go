package store

import "context"

// Pinger is a store that can tell whether it answers: the readiness probe
// of a server asks it, periodically, and stops advertising the server as
// ready while it does not.
type Pinger interface {
	// Ping makes one trivial round trip to the database within ctx. It
	// returns nil when the database answered.
	Ping(ctx context.Context) error
}
