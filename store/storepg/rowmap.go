package storepg

import (
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oncejob/oncejob/store/internal/rowmap"
)

// columns is how this store's rows hold the column types that differ between
// the stores (see rowmap.Columns): Postgres has each as its Go type.
var columns = rowmap.Columns[pgtype.UUID, pgtype.UUID, int32, bool, time.Time]{
	UUID:     func(u pgtype.UUID) string { return u.String() },
	NullUUID: uuidString,
	Int32:    rowmap.Same[int32],
	Bool:     rowmap.Same[bool],
	Time:     rowmap.Same[time.Time],
}
