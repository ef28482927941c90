package storesqlite

import (
	"context"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rowmap"
	"github.com/oncejob/oncejob/store/storesqlite/internal/dbsqlite"
)

// APIKeyCreate implements store.APIKeyStore.
func (s *Store) APIKeyCreate(ctx context.Context, params *store.APIKeyCreateParams) (*store.APIKey, error) {
	var row dbsqlite.ApiKey
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		var err error
		row, err = s.q.APIKeyInsert(ctx, tx, dbsqlite.APIKeyInsertParams{
			ID:        params.ID,
			Tenant:    params.Tenant,
			Role:      string(params.Role),
			Name:      params.Name,
			Sha256:    params.SHA256,
			CreatedAt: now,
		})
		return interpretError(err)
	})
	if err != nil {
		return nil, err
	}
	return apiKeyFromRow(row), nil
}

// APIKeyRevoke implements store.APIKeyStore.
func (s *Store) APIKeyRevoke(ctx context.Context, params *store.APIKeyRevokeParams) (*store.APIKey, error) {
	var row dbsqlite.ApiKey
	err := s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		var err error
		row, err = s.q.APIKeyRevoke(ctx, tx, dbsqlite.APIKeyRevokeParams{Now: &now, ID: params.ID})
		return interpretError(err)
	})
	if err != nil {
		return nil, err
	}
	return apiKeyFromRow(row), nil
}

// APIKeyTouch implements store.APIKeyStore.
func (s *Store) APIKeyTouch(ctx context.Context, params *store.APIKeyTouchParams) error {
	return s.inWriteTx(ctx, func(ctx context.Context, tx *writeTx, now int64) error {
		return interpretError(s.q.APIKeyTouch(ctx, tx, dbsqlite.APIKeyTouchParams{Now: &now, ID: params.ID, EveryMicros: params.Every.Microseconds()}))
	})
}

// TenantUsage implements store.UsageStore.
func (s *Store) TenantUsage(ctx context.Context, params *store.TenantUsageParams) (*store.TenantUsage, error) {
	row, err := s.q.TenantUsage(ctx, s.read, dbsqlite.TenantUsageParams{Tenant: params.Tenant, Since: params.Since.UnixMicro()})
	if err != nil {
		return nil, interpretError(err)
	}
	return &store.TenantUsage{InFlight: row.InFlight, DocumentBytes: row.DocumentBytes}, nil
}

// apiKeyFromRow is the key of an api_keys row.
func apiKeyFromRow(r dbsqlite.ApiKey) *store.APIKey {
	return columns.APIKey(rowmap.APIKeyRow[int64](r))
}
