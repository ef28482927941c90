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

// WritePinger is a store whose reads may answer while its writes cannot
// commit: Postgres with synchronous_standby_names set and the synchronous
// standby lost, where every commit waits for a confirmation that never
// comes (docs/operations.md, "A lost synchronous standby"). The readiness
// probe asks it too.
type WritePinger interface {
	// PingWrite commits one transaction that writes (and so waits for
	// what every commit waits for) within ctx. It returns nil when the
	// commit was confirmed.
	PingWrite(ctx context.Context) error
}

// ConnectionCounter is a store that says how many connections it holds at
// most: the server's default per-tenant share of store calls is half of it
// (docs/operations.md, "Limits").
type ConnectionCounter interface {
	Connections() int
}
