-- 0016_server_secrets: secrets every server of one store shares; as
-- migrations/postgres/0016_server_secrets. Times are unix microseconds, as
-- everywhere in this store.

CREATE TABLE server_secrets (
    name       TEXT    PRIMARY KEY,
    secret     BLOB    NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;
