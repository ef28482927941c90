package storepg

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// SecretGetOrCreate implements store.SecretStore. The insert does nothing
// when the name exists, and a racing insert waits for the first one's
// commit, so the read after it returns the secret that won.
func (s *Store) SecretGetOrCreate(ctx context.Context, params *store.SecretGetOrCreateParams) ([]byte, error) {
	if err := s.q.ServerSecretInsert(ctx, s.pool, dbsqlc.ServerSecretInsertParams{Name: params.Name, Secret: params.Fresh}); err != nil {
		return nil, interpretError(err)
	}
	secret, err := s.q.ServerSecretGet(ctx, s.pool, params.Name)
	if err != nil {
		return nil, interpretError(err)
	}
	return secret, nil
}
