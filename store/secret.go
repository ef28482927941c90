package store

import "context"

// SecretStore keeps the secrets every server of one store shares, such as
// the key its page tokens are signed with (docs/architecture.md, "Page
// tokens"), so that a token one replica issued is accepted by another.
type SecretStore interface {
	// SecretGetOrCreate returns the secret called params.Name. If there is
	// none it stores params.Fresh first and returns it. Two callers racing
	// on an absent name both get the one secret that was stored, not each
	// its own fresh. A secret is never changed; deleting its row (an
	// operator's rotation) makes the next call store a new one.
	SecretGetOrCreate(ctx context.Context, params *SecretGetOrCreateParams) ([]byte, error)
}

type SecretGetOrCreateParams struct {
	Name  string
	Fresh []byte // stored when Name has no secret yet
}
