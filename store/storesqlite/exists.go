package storesqlite

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Exists reports whether dataDir holds an embedded store, so a command that
// only reads or changes one (`oncejob keys`) can refuse a directory that
// has none instead of creating an empty store there.
func Exists(dataDir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dataDir, databaseFileName))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, err
}
