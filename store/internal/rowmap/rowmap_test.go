package rowmap_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store/internal/rowmap"
)

var (
	errQuery = errors.New("query failed")
	errRead  = errors.New("read by the store")
	errRow   = errors.New("row refused")
)

// interpret stands for a store's interpretError: it must see every query
// error, and its answer is what the caller gets.
func interpret(err error) error { return errors.Join(errRead, err) }

func itoa(i int) string { return strconv.Itoa(i) }

func TestMap(t *testing.T) {
	t.Parallel()
	got, err := rowmap.Map([]int{1, 2, 3}, nil, interpret, itoa)
	require.NoError(t, err)
	require.Equal(t, []string{"1", "2", "3"}, got, "every row, in order")

	got, err = rowmap.Map[int, string](nil, nil, interpret, itoa)
	require.NoError(t, err)
	require.NotNil(t, got, "no rows: an empty list, not nil")
	require.Empty(t, got)

	got, err = rowmap.Map([]int{1}, errQuery, interpret, itoa)
	require.ErrorIs(t, err, errRead, "the query's error as the store reads it")
	require.ErrorIs(t, err, errQuery)
	require.Nil(t, got)
}

func TestMapErr(t *testing.T) {
	t.Parallel()
	refuse2 := func(i int) (string, error) {
		if i == 2 {
			return "", errRow
		}
		return itoa(i), nil
	}
	got, err := rowmap.MapErr([]int{1, 3}, nil, interpret, refuse2)
	require.NoError(t, err)
	require.Equal(t, []string{"1", "3"}, got)

	got, err = rowmap.MapErr([]int{1, 2, 3}, nil, interpret, refuse2)
	require.ErrorIs(t, err, errRow, "a refused row is the error as it is")
	require.NotErrorIs(t, err, errRead, "a row's refusal is not a query error")
	require.Nil(t, got)

	_, err = rowmap.MapErr([]int{1}, errQuery, interpret, refuse2)
	require.ErrorIs(t, err, errRead)
}

func TestOne(t *testing.T) {
	t.Parallel()
	got, err := rowmap.One(7, nil, interpret, itoa)
	require.NoError(t, err)
	require.Equal(t, "7", got)

	got, err = rowmap.One(7, errQuery, interpret, itoa)
	require.ErrorIs(t, err, errRead)
	require.Empty(t, got, "no value with an error")

	_, err = rowmap.OneErr(7, nil, interpret, func(int) (string, error) { return "", errRow })
	require.ErrorIs(t, err, errRow)
	require.NotErrorIs(t, err, errRead)
}

func TestPage(t *testing.T) {
	t.Parallel()
	type page struct {
		items []string
		limit int
	}
	makePage := func(items []string, limit int) page { return page{items, limit} }
	got, err := rowmap.Page([]int{1, 2, 3}, nil, interpret, rowmap.Total(itoa), 2, makePage)
	require.NoError(t, err)
	require.Equal(t, page{[]string{"1", "2", "3"}, 2}, got, "the page is made of every row read and the limit")

	_, err = rowmap.Page([]int{1}, errQuery, interpret, rowmap.Total(itoa), 2, makePage)
	require.ErrorIs(t, err, errRead)
}

func TestKeyed(t *testing.T) {
	t.Parallel()
	got, err := rowmap.Keyed([]int{1, 2}, nil, interpret, func(i int) (string, int) { return itoa(i), i * 10 })
	require.NoError(t, err)
	require.Equal(t, map[string]int{"1": 10, "2": 20}, got)

	_, err = rowmap.Keyed([]int{1}, errQuery, interpret, func(i int) (string, int) { return itoa(i), i })
	require.ErrorIs(t, err, errRead)
}

func TestNonNil(t *testing.T) {
	t.Parallel()
	require.NotNil(t, rowmap.NonNilMap[string, string](nil))
	m := map[string]string{"a": "b"}
	require.Equal(t, m, rowmap.NonNilMap(m))
	require.NotNil(t, rowmap.NonNilSlice[byte](nil))
	require.Equal(t, []byte("x"), rowmap.NonNilSlice([]byte("x")))
}
