package storepg

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// jobFromRow names every field of a jobs row (its columns are not in
// rowmap.JobRow's order since migration 0032): a column added to one and not
// to the other, or not to jobFromRow, fails here rather than reading as its
// zero value.
func TestJobFromRowNamesEveryColumn(t *testing.T) {
	t.Parallel()
	row, want := reflect.TypeOf(dbsqlc.Job{}), reflect.TypeOf(rowmap.JobRow[time.Time]{})
	require.Equal(t, want.NumField(), row.NumField())
	r := reflect.New(row).Elem()
	bools := 0
	for i := 0; i < row.NumField(); i++ {
		f := row.Field(i)
		w, ok := want.FieldByName(f.Name)
		require.True(t, ok, "rowmap.JobRow has no field %s", f.Name)
		require.Equal(t, w.Type, f.Type, f.Name)
		// A value of its own for each field (its name, its index, a time of
		// its index; the bools alternate): a field carried into another of
		// the same type fails too.
		switch v := r.Field(i); f.Type {
		case reflect.TypeOf(""):
			v.SetString(f.Name)
		case reflect.TypeOf(int64(0)):
			v.SetInt(int64(i + 1))
		case reflect.TypeOf(false):
			bools++
			v.SetBool(bools%2 == 1)
		case reflect.TypeOf(time.Time{}):
			v.Set(reflect.ValueOf(time.Unix(int64(i+1), 0)))
		case reflect.TypeOf((*string)(nil)):
			name := f.Name
			v.Set(reflect.ValueOf(&name))
		case reflect.TypeOf((*time.Time)(nil)):
			at := time.Unix(int64(i+1), 0)
			v.Set(reflect.ValueOf(&at))
		default:
			t.Fatalf("no value of its own for %s's type %s: add one", f.Name, f.Type)
		}
	}
	mapped := jobRowOf(r.Interface().(dbsqlc.Job))
	m := reflect.ValueOf(mapped)
	for i := 0; i < row.NumField(); i++ {
		name := row.Field(i).Name
		require.Equal(t, r.Field(i).Interface(), m.FieldByName(name).Interface(), name)
	}
}
