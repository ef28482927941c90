// Package pagetoken seals the opaque tokens the server hands out to be
// handed back (list page tokens, watch cursors), so that it reads back only
// what it wrote, for the list and the tenant it wrote it for, and so that a
// caller learns nothing from one (a watch cursor's position is the
// database's global transaction counter). See docs/architecture.md, "Page
// tokens".
//
// A token is base64url of its encrypted payload and a 128-bit tag:
// HMAC-SHA256, under a key derived from the server's secret, of the
// token's kind, its tenant and its payload; the payload is encrypted with
// AES-256-CTR under another key derived from the secret, the tag its IV
// (SIV: deterministic authenticated encryption, so one position is one
// token). Open decrypts, then checks the tag in constant time before the
// payload is looked at; the caller then parses the payload fully before
// any of it reaches the store.
package pagetoken

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
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

// encLabel derives the key that encrypts payloads.
const encLabel = "oncejob page token v2 encryption"

// Signer seals and opens tokens. It is safe for concurrent use.
type Signer struct {
	key []byte
	enc cipher.Block
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
	e := hmac.New(sha256.New, secret)
	e.Write([]byte(encLabel))
	block, err := aes.NewCipher(e.Sum(nil)) // 32 bytes: AES-256
	if err != nil {
		return nil, err
	}
	return &Signer{key: m.Sum(nil), enc: block}, nil
}

// NewSecret returns a random secret for New.
func NewSecret() []byte {
	b := make([]byte, MinSecretBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return b
}

// Seal returns the token of payload, for kind and tenant.
func (s *Signer) Seal(kind Kind, tenant string, payload []byte) string {
	tag := s.tag(kind, tenant, payload)
	b := make([]byte, len(payload), len(payload)+tagBytes)
	s.crypt(tag, b, payload)
	return base64.RawURLEncoding.EncodeToString(append(b, tag...))
}

// Open returns the payload of a token Seal made for kind and tenant, or
// ErrInvalid. It also opens a token of the format before payloads were
// encrypted (the payload in clear, the same tag), so that cursors and
// pages handed out before an upgrade still resume after it; the tag
// authenticates those as it always did.
func (s *Signer) Open(kind Kind, tenant, token string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) < tagBytes {
		return nil, ErrInvalid
	}
	sealed, tag := b[:len(b)-tagBytes], b[len(b)-tagBytes:]
	payload := make([]byte, len(sealed))
	s.crypt(tag, payload, sealed)
	if hmac.Equal(tag, s.tag(kind, tenant, payload)) {
		return payload, nil
	}
	if hmac.Equal(tag, s.tag(kind, tenant, sealed)) {
		return sealed, nil // a token of the signed-only format
	}
	return nil, ErrInvalid
}

// crypt encrypts or decrypts src into dst: AES-CTR with the tag as IV.
func (s *Signer) crypt(tag, dst, src []byte) {
	cipher.NewCTR(s.enc, tag).XORKeyStream(dst, src) //nolint:gosec // the IV is the SIV tag, unique per (kind, tenant, payload)
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
	secret, err := st.SecretGetOrCreate(ctx, &store.SecretGetOrCreateParams{Name: SecretName, Fresh: NewSecret()})
	if err != nil {
		return nil, fmt.Errorf("pagetoken: load the secret: %w", err)
	}
	return secret, nil
}
