// Package pagetoken signs the opaque tokens the server hands out to be
// handed back (list page tokens, watch cursors), so that it reads back only
// what it wrote, for the list and the tenant it wrote it for. See
// docs/architecture.md, "Page tokens".
//
// A token is base64url of its payload and a 128-bit tag: HMAC-SHA256,
// under a key derived from the server's secret, of the token's kind, its
// tenant and its payload. The tag is checked in constant time before the
// payload is looked at; the caller then parses the payload fully before
// any of it reaches the store.
package pagetoken

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/oncejob/oncejob/store"
)

// SecretName is the name of the secret in store.SecretStore.
const SecretName = "page-token"

// MinSecretBytes is the least secret New takes.
const MinSecretBytes = 32

// Kind is what a token is a position in. A token of one kind is refused as
// another.
type Kind byte

// The kinds of token.
const (
	Jobs        Kind = 'j' // ListJobs' page_token
	Runs        Kind = 'r' // ListRuns' page_token
	Schedules   Kind = 's' // ListSchedules' page_token
	Deliveries  Kind = 'd' // ListDeliveries' page_token
	WatchCursor Kind = 'w' // ListJobs' watch_cursor, WatchJobs' cursors
)

// tagBytes is how much of the HMAC a token carries: 128 bits, past any
// guessing, and 22 base64 characters rather than 43.
const tagBytes = 16

// keyLabel separates this key from any other derived from the secret; a
// new token format takes a new label, so old tokens fail as forged ones.
const keyLabel = "oncejob page token v1"

// ErrInvalid is what Open returns for any token it did not seal for that
// kind and tenant: malformed, altered, forged, another list's or another
// tenant's, or sealed under another secret.
var ErrInvalid = errors.New("pagetoken: not a token this server issued")

// Signer seals and opens tokens. It is safe for concurrent use.
type Signer struct {
	key []byte
}

// New returns a Signer whose key is derived from secret, which is at least
// MinSecretBytes long. Servers with the same secret accept each other's
// tokens.
func New(secret []byte) (*Signer, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("pagetoken: the secret is %d bytes; at least %d are needed", len(secret), MinSecretBytes)
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(keyLabel))
	return &Signer{key: m.Sum(nil)}, nil
}

// NewSecret returns a random secret for New.
func NewSecret() []byte {
	b := make([]byte, MinSecretBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return b
}

// Seal returns the token of payload, for kind and tenant.
func (s *Signer) Seal(kind Kind, tenant string, payload []byte) string {
	b := append(payload[:len(payload):len(payload)], s.tag(kind, tenant, payload)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Open returns the payload of a token Seal made for kind and tenant, or
// ErrInvalid.
func (s *Signer) Open(kind Kind, tenant, token string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) < tagBytes {
		return nil, ErrInvalid
	}
	payload, tag := b[:len(b)-tagBytes], b[len(b)-tagBytes:]
	if !hmac.Equal(tag, s.tag(kind, tenant, payload)) {
		return nil, ErrInvalid
	}
	return payload, nil
}

// tag is the truncated HMAC of kind, the tenant (length-prefixed, so no
// tenant and payload run into each other) and the payload.
func (s *Signer) tag(kind Kind, tenant string, payload []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte{byte(kind)})
	m.Write(binary.AppendUvarint(nil, uint64(len(tenant))))
	m.Write([]byte(tenant))
	m.Write(payload)
	return m.Sum(nil)[:tagBytes]
}

// LoadSecret returns the secret every server of st shares, making it if
// this is the first server of st to ask.
func LoadSecret(ctx context.Context, st store.SecretStore) ([]byte, error) {
	secret, err := st.SecretGetOrCreate(ctx, SecretName, NewSecret())
	if err != nil {
		return nil, fmt.Errorf("pagetoken: load the secret: %w", err)
	}
	return secret, nil
}
