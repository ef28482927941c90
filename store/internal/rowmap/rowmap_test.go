package rowmap_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store"
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

// TestColumnsJob: a row's columns go through the store's conversions, and
// stored JSON that is not what it should be is an error naming the store
// and the job.
func TestColumnsJob(t *testing.T) {
	t.Parallel()
	at := time.Unix(1700000000, 0).UTC()
	c := rowmap.Columns[int64]{Store: "teststore", Time: func(int64) time.Time { return at }}
	from, owner, jobErr := "src", "w1", `{"code":"X","message":"m"}`
	row := rowmap.JobRow[int64]{
		ID: "j", Tenant: "t", Attempt: 3, DeduplicatedFrom: &from, Labels: `{"a":"b"}`, Params: `{}`,
		LeaseOwner: &owner, CancelRequested: true, Error: &jobErr,
	}
	job, err := c.Job(row)
	require.NoError(t, err)
	require.Equal(t, "j", job.ID)
	require.Equal(t, int32(3), job.Attempt)
	require.Equal(t, "src", job.DeduplicatedFrom)
	require.Equal(t, map[string]string{"a": "b"}, job.Labels)
	require.Equal(t, "w1", job.LeaseOwner)
	require.True(t, job.CancelRequested)
	require.False(t, job.Approved)
	require.Equal(t, at, job.CreatedAt)
	require.Nil(t, job.Output, "a NULL output stays nil")
	require.NotNil(t, job.Error)

	row.Labels = "not json"
	_, err = c.Job(row)
	require.ErrorContains(t, err, "teststore: job j: labels column")

	row.Labels, row.Error = `{}`, new(string)
	_, err = c.Job(row)
	require.ErrorContains(t, err, "teststore: job j: error column")
}

func TestAffected(t *testing.T) {
	t.Parallel()
	require.NoError(t, rowmap.Affected(1, nil, interpret), "the row changed")
	require.ErrorIs(t, rowmap.Affected(0, nil, interpret), store.ErrNotFound, "no row changed: none to change")
	err := rowmap.Affected(0, errQuery, interpret)
	require.ErrorIs(t, err, errRead, "the statement's error as the store reads it")
	require.ErrorIs(t, err, errQuery)
	require.NotErrorIs(t, err, store.ErrNotFound)
}
