package pagetoken_test

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/server/pagetoken"
)

func TestSealOpen(t *testing.T) {
	t.Parallel()
	secret := pagetoken.NewSecret()
	sig, err := pagetoken.New(secret)
	require.NoError(t, err)
	payload := []byte(`{"t":1,"id":"x"}`)
	token := sig.Seal(pagetoken.Jobs, "acme", payload)

	got, err := sig.Open(pagetoken.Jobs, "acme", token)
	require.NoError(t, err)
	require.Equal(t, payload, got)

	same, err := pagetoken.New(bytes.Clone(secret))
	require.NoError(t, err)
	_, err = same.Open(pagetoken.Jobs, "acme", token)
	require.NoError(t, err, "the same secret opens it")

	other, err := pagetoken.New(pagetoken.NewSecret())
	require.NoError(t, err)
	_, err = other.Open(pagetoken.Jobs, "acme", token)
	require.ErrorIs(t, err, pagetoken.ErrInvalid, "another secret does not")

	_, err = sig.Open(pagetoken.Runs, "acme", token)
	require.ErrorIs(t, err, pagetoken.ErrInvalid, "another kind does not")
	_, err = sig.Open(pagetoken.Jobs, "acmf", token)
	require.ErrorIs(t, err, pagetoken.ErrInvalid, "another tenant does not")
	for _, bad := range []string{"", "!!", "AAAA", token[:len(token)-1], token + "A"} {
		_, err = sig.Open(pagetoken.Jobs, "acme", bad)
		require.ErrorIs(t, err, pagetoken.ErrInvalid, "%q", bad)
	}
	// The tenant is length-prefixed: a byte moved from the payload to the
	// tenant ("acme" + "{x" as "acme{" + "x") does not keep the tag.
	raw, err := base64.RawURLEncoding.DecodeString(sig.Seal(pagetoken.Jobs, "acme", []byte("{x")))
	require.NoError(t, err)
	_, err = sig.Open(pagetoken.Jobs, "acme{", base64.RawURLEncoding.EncodeToString(raw[1:]))
	require.ErrorIs(t, err, pagetoken.ErrInvalid)

	_, err = pagetoken.New(secret[:pagetoken.MinSecretBytes-1])
	require.Error(t, err, "a short secret is refused")
}

// TestSealHidesThePayload: a token shows nothing of its payload, one
// payload is one token, and a token of the signed-only format (payload in
// clear, the same tag) still opens, so positions handed out before the
// payload was encrypted resume.
func TestSealHidesThePayload(t *testing.T) {
	t.Parallel()
	sig, err := pagetoken.New(pagetoken.NewSecret())
	require.NoError(t, err)
	payload := []byte("w1:123456789:42")
	token := sig.Seal(pagetoken.WatchCursor, "acme", payload)
	raw, err := base64.RawURLEncoding.DecodeString(token)
	require.NoError(t, err)
	require.False(t, bytes.Contains(raw, []byte("123456789")), "the position is not in clear")
	require.Equal(t, token, sig.Seal(pagetoken.WatchCursor, "acme", payload), "deterministic")
	require.NotEqual(t, token, sig.Seal(pagetoken.WatchCursor, "globex", payload), "another tenant, another token")

	old := base64.RawURLEncoding.EncodeToString(append(append([]byte{}, payload...), raw[len(raw)-16:]...))
	got, err := sig.Open(pagetoken.WatchCursor, "acme", old)
	require.NoError(t, err, "a signed-only token of the format before still opens")
	require.Equal(t, payload, got)
	_, err = sig.Open(pagetoken.WatchCursor, "globex", old)
	require.ErrorIs(t, err, pagetoken.ErrInvalid)
	forged := base64.RawURLEncoding.EncodeToString(append([]byte("w1:999999999:42"), raw[len(raw)-16:]...))
	_, err = sig.Open(pagetoken.WatchCursor, "acme", forged)
	require.ErrorIs(t, err, pagetoken.ErrInvalid, "a changed payload in clear is refused")
}
