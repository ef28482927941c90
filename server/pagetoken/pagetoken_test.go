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
