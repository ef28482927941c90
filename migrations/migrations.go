// Package migrations holds oncejob's schema migrations, embedded in the
// binary: one directory per dialect, the same version numbers in each.
//
// A migration is a file named NNNN_name.up.sql. This package finds and
// orders them, and runs them (Run) or checks them (Validate) through a
// Driver each store implements in its own dialect.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string // file name, for messages
	SQL     string
}

// Postgres returns the Postgres migrations, in version order.
func Postgres() ([]Migration, error) {
	return load(files, "postgres")
}

// SQLite returns the SQLite migrations, in version order.
func SQLite() ([]Migration, error) {
	return load(files, "sqlite")
}

var fileName = regexp.MustCompile(`^(\d{4})_[a-z0-9_]+\.up\.sql$`)

func load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("migrations: read %s: %w", dir, err)
	}
	var out []Migration
	seen := make(map[int]string)
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migrations: %s/%s: name is not NNNN_name.up.sql", dir, e.Name())
		}
		version, _ := strconv.Atoi(m[1])
		if other, ok := seen[version]; ok {
			return nil, fmt.Errorf("migrations: %s: version %d in both %s and %s", dir, version, other, e.Name())
		}
		seen[version] = e.Name()
		sql, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
		}
		out = append(out, Migration{Version: version, Name: e.Name(), SQL: string(sql)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}
