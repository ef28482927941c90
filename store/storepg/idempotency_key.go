package storepg

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// IdempotencyKeyDeleteExpired implements store.Store.
func (s *Store) IdempotencyKeyDeleteExpired(ctx context.Context, params *store.IdempotencyKeyDeleteExpiredParams) (int64, error) {
	n, err := s.q.IdempotencyKeyDeleteExpired(ctx, s.pool, dbsqlc.IdempotencyKeyDeleteExpiredParams{
		CreatedBefore: params.CreatedBefore,
		Max:           int64(params.PageLimit()),
	})
	return n, interpretError(err)
}
