package storesqlite

import (
	"github.com/oncejob/oncejob/store/internal/rowmap"
)

// columns is how this store's rows hold the column types that differ between
// the stores (see rowmap.Columns): a uuid is TEXT, the others INTEGER.
var columns = rowmap.Columns[string, *string, int64, int64, int64]{
	UUID:     rowmap.Same[string],
	NullUUID: deref,
	Int32:    func(i int64) int32 { return int32(i) },
	Bool:     func(b int64) bool { return b != 0 },
	Time:     timeFrom,
}
