package storesqlite

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// SecretGetOrCreate implements store.SecretStore: the insert and the read
// are one write transaction, and writes are serialised.
func (s *Store) SecretGetOrCreate(ctx context.Context, params *store.SecretGetOrCreateParams) ([]byte, error) {
	var secret []byte
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		if err := s.q.ServerSecretInsert(ctx, tx, dbsqlite.ServerSecretInsertParams{Name: params.Name, Secret: params.Fresh, CreatedAt: now}); err != nil {
			return interpretError(err)
		}
		var err error
		secret, err = s.q.ServerSecretGet(ctx, tx, params.Name)
		return interpretError(err)
	})
	if err != nil {
		return nil, err
	}
	return secret, nil
}
