package storesqlite

import (
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// columns is how this store's rows hold the column types that differ between
// the stores (see rowmap.Columns): a uuid and JSON are TEXT, the others
// INTEGER.
var columns = rowmap.Columns[string, *string, int64, int64, int64, *int64, string, *string]{
	Store:    "storesqlite",
	UUID:     rowmap.Same[string],
	NullUUID: deref,
	Int32:    func(i int64) int32 { return int32(i) },
	Bool:     func(b int64) bool { return b != 0 },
	Time:     timeFrom,
	NullTime: timePtrFrom,
	JSON:     func(s string) []byte { return []byte(s) },
	NullJSON: func(s *string) []byte {
		if s == nil {
			return nil
		}
		return []byte(*s)
	},
}

// jobFromRow is the job of a jobs row.
func jobFromRow(r dbsqlite.Job) (*store.Job, error) {
	return columns.Job(rowmap.JobRow[string, *string, int64, int64, int64, *int64, string, *string](r))
}
