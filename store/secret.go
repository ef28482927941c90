package store

import "context"

// SecretStore keeps the secrets every server of one store shares, such as
// the key its page tokens are signed with (docs/architecture.md, "Page
// tokens"), so that a token one replica issued is accepted by another.
type SecretStore interface {
	// SecretGetOrCreate returns the secret called name. If there is none it
	// stores fresh first and returns it. Two callers racing on an absent
	// name both get the one secret that was stored, not each its own
	// fresh. A secret is never changed; deleting its row (an operator's
	// rotation) makes the next call store a new one.
	SecretGetOrCreate(ctx context.Context, name string, fresh []byte) ([]byte, error)
}
