package storepg

import (
	"context"
	"time"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

// APIKeyCreate implements store.APIKeyStore.
func (s *Store) APIKeyCreate(ctx context.Context, params *store.APIKeyCreateParams) (*store.APIKey, error) {
	row, err := s.q.APIKeyInsert(ctx, s.pool, dbsqlc.APIKeyInsertParams{
		ID:     params.ID,
		Tenant: params.Tenant,
		Role:   string(params.Role),
		Name:   params.Name,
		Sha256: params.SHA256,
	})
	return rowmap.One(row, err, interpretError, apiKeyFromRow)
}

// APIKeyRevoke implements store.APIKeyStore.
func (s *Store) APIKeyRevoke(ctx context.Context, params *store.APIKeyRevokeParams) (*store.APIKey, error) {
	row, err := s.q.APIKeyRevoke(ctx, s.pool, params.ID)
	return rowmap.One(row, err, interpretError, apiKeyFromRow)
}

// APIKeyTouch implements store.APIKeyStore.
func (s *Store) APIKeyTouch(ctx context.Context, params *store.APIKeyTouchParams) error {
	return interpretError(s.q.APIKeyTouch(ctx, s.pool, dbsqlc.APIKeyTouchParams{ID: params.ID, Every: interval(params.Every)}))
}

// TenantUsage implements store.UsageStore.
func (s *Store) TenantUsage(ctx context.Context, params *store.TenantUsageParams) (*store.TenantUsage, error) {
	row, err := s.q.TenantUsage(ctx, s.pool, dbsqlc.TenantUsageParams{Tenant: params.Tenant, Since: params.Since})
	if err != nil {
		return nil, interpretError(err)
	}
	return &store.TenantUsage{InFlight: row.InFlight, DocumentBytes: row.DocumentBytes}, nil
}

// apiKeyFromRow is the key of an api_keys row.
func apiKeyFromRow(r dbsqlc.ApiKey) *store.APIKey {
	return columns.APIKey(rowmap.APIKeyRow[time.Time](r))
}
