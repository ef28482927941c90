//go:build unix

package storesqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDataDir takes an exclusive flock on <dir>/oncejob.lock and returns the
// open file that holds it. The lock goes with the file: Close releases it,
// and so does the kernel when the process dies, so a crash never leaves a
// stale lock behind. flock locks belong to the open file, so a second Open in
// the same process is refused too.
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("storesqlite: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close() // the lock failed; the file is of no further use
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("store/storesqlite: data directory %s is in use by another oncejob process (lock %s)", dir, path)
		}
		return nil, fmt.Errorf("storesqlite: lock %s: %w", path, err)
	}
	return f, nil
}
