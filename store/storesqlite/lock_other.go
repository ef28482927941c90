//go:build !unix

package storesqlite

import (
	"fmt"
	"os"
	"runtime"
)

// lockDataDir refuses: without a lock two processes could share one
// database, which the store does not support.
func lockDataDir(dir string) (*os.File, error) {
	return nil, fmt.Errorf("storesqlite: locking data directory %s is not supported on %s", dir, runtime.GOOS)
}
