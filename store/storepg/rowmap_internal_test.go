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
	for i := 0; i < row.NumField(); i++ {
		f := row.Field(i)
		w, ok := want.FieldByName(f.Name)
		require.True(t, ok, "rowmap.JobRow has no field %s", f.Name)
		require.Equal(t, w.Type, f.Type, f.Name)
		// A value that is not the zero value of any field: jobFromRow must
		// carry each one over.
		switch f.Type.Kind() {
		case reflect.String:
			r.Field(i).SetString("x")
		case reflect.Int64:
			r.Field(i).SetInt(7)
		case reflect.Bool:
			r.Field(i).SetBool(true)
		}
	}
	mapped := jobRowOf(r.Interface().(dbsqlc.Job))
	m := reflect.ValueOf(mapped)
	for i := 0; i < row.NumField(); i++ {
		name := row.Field(i).Name
		require.Equal(t, r.Field(i).Interface(), m.FieldByName(name).Interface(), name)
	}
}
