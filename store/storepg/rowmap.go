package storepg

import (
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// columns is how this store's rows hold the column types that differ between
// the stores (see rowmap.Columns): Postgres has each as its Go type.
var columns = rowmap.Columns[pgtype.UUID, pgtype.UUID, int32, bool, time.Time, *time.Time, []byte, []byte]{
	Store:    "storepg",
	UUID:     func(u pgtype.UUID) string { return u.String() },
	NullUUID: uuidString,
	Int32:    rowmap.Same[int32],
	Bool:     rowmap.Same[bool],
	Time:     rowmap.Same[time.Time],
	NullTime: rowmap.Same[*time.Time],
	JSON:     rowmap.Same[[]byte],
	NullJSON: rowmap.Same[[]byte],
}

// jobFromRow is the job of a jobs row.
func jobFromRow(r dbsqlc.Job) (*store.Job, error) {
	return columns.Job(rowmap.JobRow[pgtype.UUID, pgtype.UUID, int32, bool, time.Time, *time.Time, []byte, []byte](r))
}
