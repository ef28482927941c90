package storepg

import (
	"context"

	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// SecretGetOrCreate implements store.SecretStore. The insert does nothing
// when the name exists, and a racing insert waits for the first one's
// commit, so the read after it returns the secret that won.
func (s *Store) SecretGetOrCreate(ctx context.Context, name string, fresh []byte) ([]byte, error) {
	if err := s.q.ServerSecretInsert(ctx, s.pool, dbsqlc.ServerSecretInsertParams{Name: name, Secret: fresh}); err != nil {
		return nil, interpretError(err)
	}
	secret, err := s.q.ServerSecretGet(ctx, s.pool, name)
	if err != nil {
		return nil, interpretError(err)
	}
	return secret, nil
}
