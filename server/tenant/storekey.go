package tenant

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

// A store key is ojk_<id>_<secret>: the id (12 base32 characters, 60
// random bits) finds its row, so a lookup is one indexed read; the secret
// (32 random bytes) is what makes it a key. Only sha256 of the whole key is
// stored. ojk_<id> is the key's display prefix.
const storeKeyScheme = "ojk_"

var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewStoreKey returns a new random key, its id and its display prefix.
func NewStoreKey() (key, id, prefix string) {
	var idBytes [8]byte
	var secret [32]byte
	_, _ = rand.Read(idBytes[:]) // crypto/rand.Read never fails (Go 1.24+)
	_, _ = rand.Read(secret[:])
	id = keyEncoding.EncodeToString(idBytes[:])[:12]
	return storeKeyScheme + id + "_" + keyEncoding.EncodeToString(secret[:]), id, storeKeyScheme + id
}

// StoreKeyPrefix is the display prefix of the store key with id.
func StoreKeyPrefix(id string) string { return storeKeyScheme + id }

// parseStoreKey returns the id of a key in the store's form.
func parseStoreKey(key string) (id string, ok bool) {
	rest, ok := strings.CutPrefix(key, storeKeyScheme)
	if !ok {
		return "", false
	}
	id, secret, ok := strings.Cut(rest, "_")
	if !ok || len(id) != 12 || secret == "" {
		return "", false
	}
	return id, true
}

// ParseKeyID returns the id of a store key, or of its display prefix
// (ojk_<id>), or id itself when it is one.
func ParseKeyID(s string) (string, bool) {
	if id, ok := parseStoreKey(s); ok {
		return id, true
	}
	s = strings.TrimPrefix(s, storeKeyScheme)
	if len(s) != 12 {
		return "", false
	}
	if _, err := keyEncoding.DecodeString(s + "aaaa"); err != nil { // 16 characters: whole 10-byte groups
		return "", false
	}
	return s, true
}
