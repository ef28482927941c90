package storesqlite_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoSQLCSliceInQueries guards the rule operator.sql states: a list is one
// JSON parameter read with json_each, never sqlc.slice. sqlc numbers a slice
// as one parameter and expands it at run time into unnumbered "?"s, so once
// it holds two values every numbered parameter after it binds the wrong
// value (issue 19: DeliveryClaimCandidates bound a sink's name to LIMIT, and
// a relay with two sinks never delivered), and nothing fails while the
// tests pass lists of one.
func TestNoSQLCSliceInQueries(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("internal", "dbsqlite", "*.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no query files found")
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, q := range sliceQueries(string(src)) {
			t.Errorf("%s: query %s uses sqlc.slice; pass a JSON array and read it with json_each (see operator.sql)", f, q)
		}
	}
}

// TestSliceQueriesFindsTheTrap checks the checker on the query that broke.
func TestSliceQueriesFindsTheTrap(t *testing.T) {
	t.Parallel()
	const broken = `-- name: Fine :many
-- a comment naming sqlc.slice('x') is no use of it
SELECT 1 FROM t WHERE a IN (SELECT value FROM json_each(CAST(@a AS TEXT))) LIMIT @max;

-- name: DeliveryClaimCandidates :many
SELECT d.id FROM deliveries d
WHERE d.due_at <= CAST(@now AS INTEGER)
    AND d.sink IN (sqlc.slice('sinks'))
LIMIT @max;

-- name: Spaced :many
SELECT 1 FROM t WHERE a IN (SQLC.SLICE ( 'xs' ));
`
	require.Equal(t, []string{"DeliveryClaimCandidates", "Spaced"}, sliceQueries(broken))
	require.Empty(t, sliceQueries("-- name: A :one\nSELECT 'sqlc.slice(x)' AS s;\n"), "a string literal is no call")
}

var (
	queryName = regexp.MustCompile(`(?m)^--\s*name:\s*(\S+)`)
	sliceCall = regexp.MustCompile(`(?i)\bsqlc\s*\.\s*slice\s*\(`)
)

// sliceQueries returns the names of the queries of a sqlc file that call
// sqlc.slice, outside comments and string literals.
func sliceQueries(src string) []string {
	var out []string
	names := queryName.FindAllStringSubmatchIndex(src, -1)
	for i, m := range names {
		end := len(src)
		if i+1 < len(names) {
			end = names[i+1][0]
		}
		if sliceCall.MatchString(code(src[m[1]:end])) {
			out = append(out, src[m[2]:m[3]])
		}
	}
	return out
}

// code is SQL without its -- comments and the contents of its '...'
// literals.
func code(sql string) string {
	var b strings.Builder
	inString := false
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case inString:
			if c == '\'' {
				inString = false
				b.WriteByte(c)
			}
		case c == '\'':
			inString = true
			b.WriteByte(c)
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
			b.WriteByte('\n')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
