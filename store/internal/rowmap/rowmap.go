// Package rowmap is what both stores do with the rows a query returned that
// is not dialect: mapping each row to a store value (Columns: the two
// dialects' rows differ only in their timestamp type), the loop around it
// and its allocation, and the reads whose steps are the same in both
// (Reads). See docs/architecture.md, "Rules up, SQL down".
package rowmap

import "github.com/oncejob/oncejob/store"

// Each maps every row with f, in order. No rows make an empty, non-nil
// slice.
func Each[R, T any](rows []R, f func(R) T) []T {
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = f(r)
	}
	return out
}

// EachErr is Each with a mapping that can refuse a row: the first refusal
// is the error, and no values.
func EachErr[R, T any](rows []R, f func(R) (T, error)) ([]T, error) {
	out := make([]T, len(rows))
	for i, r := range rows {
		var err error
		if out[i], err = f(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Map is the values of a query's rows, each mapped by f; when the query
// failed (err), no values and err as the store reads it (interpret).
func Map[R, T any](rows []R, err error, interpret func(error) error, f func(R) T) ([]T, error) {
	if err != nil {
		return nil, interpret(err)
	}
	return Each(rows, f), nil
}

// MapErr is Map with a mapping that can refuse a row, as EachErr.
func MapErr[R, T any](rows []R, err error, interpret func(error) error, f func(R) (T, error)) ([]T, error) {
	if err != nil {
		return nil, interpret(err)
	}
	return EachErr(rows, f)
}

// NonNilMap is m, or an empty map for nil: a column that is never NULL.
func NonNilMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}

// One is a query's one row mapped by f; when the query failed (err), the
// zero value and err as the store reads it (interpret).
func One[R, T any](row R, err error, interpret func(error) error, f func(R) T) (T, error) {
	if err != nil {
		var zero T
		return zero, interpret(err)
	}
	return f(row), nil
}

// OneErr is One with a mapping that can refuse the row.
func OneErr[R, T any](row R, err error, interpret func(error) error, f func(R) (T, error)) (T, error) {
	if err != nil {
		var zero T
		return zero, interpret(err)
	}
	return f(row)
}

// Page is the page a list method answers from the up to limit+1 rows it
// read (the one beyond the page tells a next page exists): the rows mapped
// by f as MapErr does, then made a page of at most limit by page (such as
// store.JobListPage).
func Page[R, T, P any](rows []R, err error, interpret func(error) error, f func(R) (T, error), limit int, page func([]T, int) P) (P, error) {
	values, err := MapErr(rows, err, interpret, f)
	if err != nil {
		var zero P
		return zero, err
	}
	return page(values, limit), nil
}

// Total is f as a mapping that never refuses a row, for MapErr and Page.
func Total[R, T any](f func(R) T) func(R) (T, error) {
	return func(r R) (T, error) { return f(r), nil }
}

// NonNilSlice is b, or an empty slice for nil, so that an empty document or
// output is bound as empty, not as NULL.
func NonNilSlice[T any](b []T) []T {
	if b == nil {
		return []T{}
	}
	return b
}

// Keyed is the rows of a query as a map, each row's key and value by f;
// when the query failed (err), no map and err as the store reads it.
func Keyed[R any, K comparable, V any](rows []R, err error, interpret func(error) error, f func(R) (K, V)) (map[K]V, error) {
	if err != nil {
		return nil, interpret(err)
	}
	m := make(map[K]V, len(rows))
	for _, r := range rows {
		k, v := f(r)
		m[k] = v
	}
	return m, nil
}

// Affected is the answer of a statement that should change one row and
// counts those it changed (n): when it failed (err), err as the store reads
// it (interpret); when it changed none, store.ErrNotFound.
func Affected(n int64, err error, interpret func(error) error) error {
	if err != nil {
		return interpret(err)
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}
