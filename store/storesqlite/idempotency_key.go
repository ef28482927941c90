package storesqlite

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// IdempotencyKeyDeleteExpired implements store.Store. One sweep is one write
// transaction, so Limit also bounds how long it keeps JobSubmit waiting.
func (s *Store) IdempotencyKeyDeleteExpired(ctx context.Context, params *store.IdempotencyKeyDeleteExpiredParams) (int64, error) {
	var n int64
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, _ int64) error {
		var err error
		n, err = s.q.IdempotencyKeyDeleteExpired(ctx, tx, dbsqlite.IdempotencyKeyDeleteExpiredParams{
			CreatedBefore: params.CreatedBefore.UnixMicro(),
			Max:           int64(params.PageLimit()),
		})
		return interpretError(err)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
