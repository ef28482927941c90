-- name: DocumentInsert :exec
-- Stores a document once per tenant and content hash; a second insert of the
-- same content is a no-op.
INSERT INTO documents (tenant, sha256, media_type, data, size_bytes, created_at)
VALUES (@tenant, @sha256, @media_type, @data, @size_bytes, @created_at)
ON CONFLICT DO NOTHING;
