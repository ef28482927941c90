package store

import (
	"context"
	"errors"
)

// ErrUnavailable: the database could not be reached, or dropped the
// connection mid-statement (a restart, a cut, a server shutting down). The
// statement may or may not have run; the same call later may succeed. A
// store wraps the driver's error with it, so errors.Is finds it and the
// driver's text stays for the log.
var ErrUnavailable = errors.New("store unavailable")

// Pinger is a store that can tell whether it answers: the readiness probe
// of a server asks it, periodically, and stops advertising the server as
// ready while it does not.
type Pinger interface {
	// Ping makes one trivial round trip to the database within ctx. It
	// returns nil when the database answered.
	Ping(ctx context.Context) error
}
