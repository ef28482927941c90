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

// APIKeyGetByID implements store.APIKeyStore.
func (s *Store) APIKeyGetByID(ctx context.Context, params *store.APIKeyGetByIDParams) (*store.APIKey, error) {
	row, err := s.q.APIKeyGetByID(ctx, s.read, params.ID)
	return rowmap.One(row, err, interpretError, apiKeyFromRow)
}

// APIKeyList implements store.APIKeyStore.
func (s *Store) APIKeyList(ctx context.Context, params *store.APIKeyListParams) ([]*store.APIKey, error) {
	rows, err := s.q.APIKeyList(ctx, s.read, dbsqlite.APIKeyListParams{
		Tenant:         params.Tenant,
		IncludeRevoked: boolInt(params.IncludeRevoked),
		Max:            int64(params.PageLimit()),
	})
	return rowmap.Map(rows, err, interpretError, apiKeyFromRow)
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

func apiKeyFromRow(r dbsqlite.ApiKey) *store.APIKey {
	k := &store.APIKey{
		ID:        r.ID,
		Tenant:    r.Tenant,
		Role:      store.Role(r.Role),
		Name:      r.Name,
		SHA256:    r.Sha256,
		CreatedAt: timeFrom(r.CreatedAt),
	}
	if r.RevokedAt != nil {
		t := timeFrom(*r.RevokedAt)
		k.RevokedAt = &t
	}
	if r.LastUsedAt != nil {
		t := timeFrom(*r.LastUsedAt)
		k.LastUsedAt = &t
	}
	return k
}
