package tenant

import "time"

// SetNow sets a's clock.
func SetNow(a *Authenticator, now func() time.Time) { a.now = now }
